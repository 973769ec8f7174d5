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

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, cast, runtime_checkable

from trustbench._imports import import_object
from trustbench.errors import AlreadyRegistered, InputError, did_you_mean

if TYPE_CHECKING:
    from importlib.metadata import EntryPoints

    from trustbench.core._context import TrialContext
    from trustbench.core.spec._manifest import Manifest
    from trustbench.core.spec._spec import ExperimentSpec


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


@dataclass(frozen=True, slots=True)
class SubjectDescription:
    """What kind of system a track's configurations are, for the report's "System under test".

    The spec asks a report to say what was tested before any figure: a model endpoint judged on
    a fixed packet is a different claim from an agent application acting through tools. Core
    knows no suite, so a track declares this as its class attribute `subject_description`; a
    track without one is described as `DEFAULT_SUBJECT` (an endpoint given a fixed packet).
    """

    subject_type: str
    """What each candidate is: `endpoint`, `agent application`, `execution architecture`."""
    information_condition: str = "packet"
    """What a candidate can see: `packet` (a fixed evidence packet, the same for every
    candidate) or `tools` (it retrieves evidence itself through the listed tools)."""
    tools: tuple[str, ...] = ()
    """Tools a candidate may call (empty: none)."""
    composite_type: str | None = None
    """What a configuration the track assembles from several candidates is (the review track's
    declared chains: `review chain`); None when the track assembles none."""


DEFAULT_SUBJECT = SubjectDescription(subject_type="endpoint")
"""How a track that declares no `subject_description` is described."""


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

    Optional: `candidate_settings(candidate) -> Collection[str]`, the `settings` keys the track
    itself reads of a candidate; `freeze` warns of any other key (`_context.unknown_settings`).
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


# ------------------------------------------------------------------------------------------------
# Registries of extensions: the generic `Registry`, and the registry of tracks.
#
# The tracks map `"suite/track"` to an import string, imported only when a run needs it.
#
# `Registry` is the one mechanism behind every `register_*` / `unregister_*` pair of the suites
# (review metrics, boundaries, TRB measures), so each refuses a duplicate the same way: with
# `AlreadyRegistered`, naming the registry and the key.
#
# Lazy loading keeps `trustbench --help` fast and lets a suite register a track with one line in
# `BUILTIN_TRACKS` without core importing the suite. Third-party packages can add tracks through the
# `trustbench.tracks` entry-point group, but never replace a built-in one: an installed package
# must not be able to swap what `rtb/review` runs. So a built-in id is resolved without scanning
# the installed distributions' entry points (10 to 15 ms at every `freeze` and `run`); tests call
# `register_track`, which does replace.

Entry = TypeVar("Entry")


class Registry(Generic[Entry]):
    """Key -> extension: built-in entries first, then registered ones, in registration order.

    A key is registered once. A second registration raises `AlreadyRegistered` instead of
    replacing the first, because a silent replacement changes what a run measures (a plug-in
    swapping a built-in rate, or two plug-ins fighting over one name, would go unnoticed). To
    change a registered entry, unregister it first; a built-in entry, or a key reserved for
    something the registry does not hold, can be neither replaced nor removed.
    """

    def __init__(
        self,
        what: str,
        built_in: Mapping[str, Entry],
        *,
        reserved: Iterable[str] = (),
        unregister_with: str,
    ) -> None:
        """Start with the built-in entries.

        Args:
            what: The registry's name in messages (e.g. `review metric`).
            built_in: Entries shipped with trustbench, in the order `values()` lists them.
            reserved: Keys taken by something outside the registry (never registrable).
            unregister_with: The public function that removes an entry (named in the refusal).
        """
        self.what = what
        self._entries: dict[str, Entry] = dict(built_in)
        self._fixed = frozenset(built_in) | frozenset(reserved)
        self._unregister_with = unregister_with

    def register(self, key: str, entry: Entry) -> None:
        """Add `entry` under `key`.

        Raises:
            AlreadyRegistered: `key` is built in, reserved or registered already.
        """
        if key in self._fixed:
            raise AlreadyRegistered(
                f"{self.what} {key!r} is built in and cannot be replaced; "
                "register yours under another name"
            )
        if key in self._entries:
            raise AlreadyRegistered(
                f"{self.what} {key!r} is already registered; "
                f"call {self._unregister_with}({key!r}) first to replace it"
            )
        self._entries[key] = entry

    def unregister(self, key: str) -> None:
        """Remove the entry registered under `key`.

        Raises:
            InputError: `key` is built in, or unknown (naming the closest registered key).
        """
        if key in self._fixed:
            raise InputError(f"{self.what} {key!r} is built in and cannot be removed")
        if key not in self._entries:
            hint = did_you_mean(key, [k for k in self._entries if k not in self._fixed])
            raise InputError(f"no {self.what} {key!r} is registered{hint}")
        del self._entries[key]

    def get(self, key: str) -> Entry | None:
        """The entry under `key`, or None."""
        return self._entries.get(key)

    def is_built_in(self, key: str) -> bool:
        """Whether `key` is one of the built-in (or reserved) keys."""
        return key in self._fixed

    def keys(self) -> tuple[str, ...]:
        """Every key, built-in first, then registered ones in registration order."""
        return tuple(self._entries)

    def values(self) -> tuple[Entry, ...]:
        """Every entry, in the order of `keys`."""
        return tuple(self._entries.values())

    def items(self) -> tuple[tuple[str, Entry], ...]:
        """Every (key, entry), in the order of `keys`."""
        return tuple(self._entries.items())

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())


BUILTIN_TRACKS: dict[str, str] = {
    "rtb/review": "trustbench.rtb.review.track:ReviewTrack",
    "rtb/control": "trustbench.rtb.control.track:ControlTrack",
    "rtb/workflow": "trustbench.rtb.workflow.track:WorkflowTrack",
    "trb/profile": "trustbench.trb.track:TrbProfileTrack",
}
"""Tracks shipped with trustbench."""

_registered: dict[str, str] = {}


def register_track(track_id: str, target: str) -> None:
    """Register (or replace) a track under `suite/track`.

    Args:
        track_id: Registry key, `"suite/track"`.
        target: Import string `"package.module:attribute"`; the attribute is a `Track` class
            (instantiated without arguments), a zero-argument factory, or a `Track` instance.
    """
    if track_id.count("/") != 1 or ":" not in target:
        raise InputError(f"bad track registration {track_id!r} -> {target!r}")
    _registered[track_id] = target


def entry_points(group: str) -> EntryPoints:
    """The installed distributions' entry points in `group`.

    `importlib.metadata` is imported here, not with the module: about 10 ms that a run of a
    built-in track never needs.
    """
    from importlib.metadata import entry_points as installed

    return installed(group=group)


def track_targets() -> dict[str, str]:
    """All known tracks and their import strings: registered, else built-in, else entry points."""
    targets = {point.name: point.value for point in entry_points(group="trustbench.tracks")}
    targets.update(BUILTIN_TRACKS)
    targets.update(_registered)
    return targets


def _target(track_id: str) -> str | None:
    found = _registered.get(track_id) or BUILTIN_TRACKS.get(track_id)
    return found if found is not None else track_targets().get(track_id)


def load_track(track_id: str) -> tuple[Track, str]:
    """Import and instantiate the track registered under `track_id`.

    Returns:
        The track and the import string it was loaded from (recorded in the manifest).

    Raises:
        InputError: when the track is unknown or does not satisfy the `Track` protocol.
    """
    target = _target(track_id)
    if target is None:
        known = ", ".join(sorted(track_targets())) or "none"
        hint = did_you_mean(track_id, track_targets())
        raise InputError(
            f"unknown track {track_id!r}{hint} (known: {known})", location="suite/track"
        )
    return track_from_target(target, track_id), target


def track_from_target(target: str, track_id: str) -> Track:
    """Import the track at `target` and instantiate it (as a Ray worker does from a manifest).

    Raises:
        InputError: when it cannot be imported or does not satisfy the `Track` protocol.
    """
    obj = import_object(target, what=f"track {track_id}")
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, Track)):
        obj = obj()
    track = obj
    if not isinstance(track, Track):
        raise InputError(f"{target} is not a Track (needs resolve, plan, run_trial)")
    return track
