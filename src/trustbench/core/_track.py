"""The track plugin contract: how a suite's track plugs into the suite-agnostic harness.

Core knows no suite. A track tells core three things:

1. `resolve(spec, base_dir)`: which files and prompt texts the experiment depends on. Core hashes
   each into the manifest at freeze time and re-checks them before every run or resume.
2. `plan(manifest)`: the full list of trials (`TrialKey`: case, candidate, trial index). Core
   freezes a digest of the plan and runs the trials in a seeded interleaved order.
3. `run_trial(key, ctx)`: one independent trial. `ctx` (a fresh `TrialContext` per trial) gives
   the candidate's settings and a provider client whose every call goes through the declared
   retry policy and is recorded as an attempt. The returned `TrialOutcome` is stored in the
   ledger; grading later reads only the ledger (raw responses included), never live state.

A track is registered under `"suite/track"` with an import string (see `_registry.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, runtime_checkable

if TYPE_CHECKING:
    from trustbench.core._context import TrialContext
    from trustbench.core._manifest import Manifest
    from trustbench.core._spec import ExperimentSpec


@dataclass(frozen=True, slots=True, order=True)
class TrialKey:
    """Identity of one independent trial: the same key is never run to completion twice."""

    case_id: str
    """The case being tried."""
    candidate: str
    """The candidate's name from the spec."""
    trial_index: int
    """0-based repetition index, below `trials_per_case`."""

    @property
    def trial_id(self) -> str:
        """Stable text id `case/candidate/index`, the ledger's unique key for the trial."""
        return f"{self.case_id}/{self.candidate}/{self.trial_index}"


@dataclass(frozen=True, slots=True)
class TrialOutcome:
    """What a trial produced: stored verbatim (as JSON) in the ledger's trials table."""

    status: Literal["completed", "failed"]
    """`completed`: the trial ran to its end (whatever the candidate answered); `failed`: it
    could not (every attempt failed, a timeout, a harness defect). Failed trials stay in the
    denominator; graders decide what a failure means for each metric."""
    outcome: Any = None
    """Track-defined JSON-serialisable result (e.g. the parsed decision, observer records)."""
    error_class: str | None = None
    """For failed trials: the error class of the last failure (e.g. `rate_limited`)."""
    error: str | None = None
    """For failed trials: a human-readable message."""


@dataclass(frozen=True, slots=True)
class ResolvedItem:
    """One input the experiment depends on: a file (hashed from disk) or an inline text."""

    role: str
    """What it is to the track: `corpus`, `schema`, `prompt`, `candidate_code`, ..."""
    name: str
    """Portable name (a path relative to the corpus root, or a prompt id); unique per role."""
    path: Path | None = None
    """The file on disk; core hashes its bytes. None for an inline text."""
    text: str | None = None
    """Inline text (e.g. a prompt built from options); core hashes its UTF-8 bytes."""
    data: bytes | None = None
    """With `path`: the file's bytes exactly as the track read and checked them. Core then
    hashes these instead of reading the file again, so the manifest pins the bytes that were
    checked, not whatever the file held a moment later."""


@dataclass(frozen=True, slots=True)
class Resolution:
    """Everything a spec resolves to, as returned by `Track.resolve`."""

    corpus_version: str | None
    """The corpus's own version label (e.g. from its MANIFEST), if it has one."""
    corpus_root: str
    """Where the corpus was found: `builtin:<label>` or an absolute folder path."""
    items: list[ResolvedItem] = field(default_factory=list)
    """Files and texts to hash into the manifest."""
    code_entries: list[tuple[str, str]] = field(default_factory=list)
    """`(module:factory, where it is set)` of user code the track imports besides each
    in-process candidate's own `entry` (the workflow track's `boundary_entry`). Core pins each
    as it pins a candidate's entry: its file and its whole package, found without importing."""


@runtime_checkable
class Track(Protocol):
    """A benchmark track: resolves its inputs, plans its trials and runs one trial at a time.

    Optional: `resolve_frozen(manifest) -> Resolution`, asked instead of `resolve` when a frozen
    experiment's inputs are re-checked (before `run`, `report`, `verify`); it may skip checks
    the freeze already ran on inputs whose hashes have not changed (see `rtb/review`).

    Optional hooks (see `track_hook`): `on_freeze(manifest, run_dir, reason) -> list[str]`,
    called by every freeze just before the manifest is written (`reason`: `freeze --reason`),
    and `before_run(manifest, run_dir) -> list[str]`, called by every `run` after its inputs
    are re-checked, the executor has started and a resumed ledger has passed its checks (a
    refused run never calls it), before any trial starts. Both may refuse (raise `InputError`:
    no trial runs or is written; `on_freeze` writes nothing); the lines they return are shown
    as notes. A sealed held-out corpus uses them to count every freeze and run against it
    (`rtb/heldout`).
    """

    def resolve(self, spec: ExperimentSpec, base_dir: Path) -> Resolution:
        """Return the corpus location and every file/prompt the experiment depends on.

        Args:
            spec: The validated experiment spec (validate `track_options` here; raise
                `InputError` naming the option).
            base_dir: The spec file's folder; relative corpus paths are relative to it.
        """
        ...

    def plan(self, manifest: Manifest) -> Sequence[TrialKey]:
        """Return every trial of the experiment (order does not matter; core shuffles)."""
        ...

    async def run_trial(self, key: TrialKey, ctx: TrialContext) -> TrialOutcome:
        """Run one independent trial from a fresh context and return its outcome.

        Raise `trustbench.core.CallFailed` (or let `ctx.chat` raise it) when the candidate could
        not be reached; core records the trial as failed with that error class.
        """
        ...


def track_hook(
    track: object, name: str, manifest: Manifest, run_dir: Path, **context: str
) -> list[str]:
    """Call a track's optional hook `name` (`on_freeze`, `before_run`); its note lines.

    `context` is passed on as keywords (`on_freeze` gets `reason`, `freeze --reason`). A track
    without the hook gives no notes: core itself knows nothing of what a hook does.
    """
    hook = getattr(track, name, None)
    if not callable(hook):
        return []
    # A hook returns its note lines; a track object's attributes are untyped (`getattr`).
    lines = cast("Iterable[object]", hook(manifest, run_dir, **context))
    return [str(line) for line in lines]
