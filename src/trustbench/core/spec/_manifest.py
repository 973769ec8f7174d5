"""The frozen manifest: the spec plus everything it resolves to, with its own SHA-256.

`freeze` writes `manifest.json` before anything runs. Its hash is the SHA-256 of the canonical
(RFC 8785) JSON of the manifest without the `manifest_sha256` field; it anchors the ledger's hash
chain. The manifest holds no time stamp, so freezing the same inputs twice gives the same hash.
It never holds a secret: API keys appear only as the *name* of an environment variable, and
`freeze` refuses to write a manifest in which the value of any such variable appears.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import platform
import random
import subprocess
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any, Literal, overload

from pydantic import BaseModel, ValidationError

import trustbench
from trustbench._canonical import (
    canonical_json,
    file_digest,
    file_sha256,
    json_sha256,
    read_input_file,
    sha256_hex,
)
from trustbench._docstrings import documented
from trustbench.core._candidate_code import ROLE as CODE_ROLE
from trustbench.core._candidate_code import entry_code_items, load_factory
from trustbench.core._outputs import check_new_run_folder, write_atomically
from trustbench.core._track import Resolution, ResolvedItem, Track, TrialKey, load_track, track_hook
from trustbench.core.gates import GateSpec
from trustbench.core.spec._spec import (
    ExperimentSpec,
    check_isolation,
    load_spec,
    refuse_unused_resample,
)
from trustbench.errors import ALLOW_MISSING_KEYS_HINT, CheckFailed, InputError

# ------------------------------------------------------------------------------------------------
# Checks `freeze` makes before anything runs: every name a spec uses must mean something.
#
# A misspelled gate metric, a gate naming a candidate that does not exist, or an unset API-key
# variable would otherwise pass the freeze, spend the whole budget, and leave the gate "not
# evaluable". Each check raises a one-line `InputError` naming the spec field (JSON-pointer style,
# as `_spec.py` does).
#
# Tracks opt in to the metric and subject checks by implementing the optional hooks
# `figure_names(spec) -> set[str]` (every figure name the track can produce for this spec; each
# a proportion in [0, 1], so a gate's threshold on one must lie there too),
# `subject_names(spec) -> set[str]` (every configuration a gate may name; default: the candidates)
# and `reserved_names(spec) -> set[str]` (the configurations the harness itself adds, such as the
# reviewer track's `unchecked` baseline: a candidate may not take one of those names, since a role
# comes from how a configuration is declared and a shared name would let one pass for the other).

ALWAYS_PRODUCED = frozenset({"valid_response_rate"})
"""Figures core adds to every subject (see `_evaluability`); a proportion."""


def check_api_keys(spec: ExperimentSpec, *, allow_missing: bool) -> None:
    """Every `api_key_env` must name a set, non-empty variable (unless explicitly allowed).

    Only the variable's presence is checked; its value is never read into the manifest.
    """
    if allow_missing:
        return
    for index, candidate in enumerate(spec.candidates):
        name = candidate.api_key_env
        if name and not os.environ.get(name):
            raise InputError(
                f"environment variable {name} (candidate {candidate.name}) is not set; set it"
                f"{ALLOW_MISSING_KEYS_HINT}",
                location=f"candidates/{index}/api_key_env",
            )


def _hook_names(track: Any, hook: str, spec: ExperimentSpec) -> set[str] | None:
    """The names a track's optional hook gives for `spec`; None when the track has no such hook."""
    named: Callable[[ExperimentSpec], Iterable[str]] | None = getattr(track, hook, None)
    return set(named(spec)) if callable(named) else None


def check_names(spec: ExperimentSpec, track: Any) -> None:
    """Every name the spec gives (its candidates') or uses (its gates') must be what it says."""
    check_reserved_names(spec, track)
    check_gates(spec, track)


def check_reserved_names(spec: ExperimentSpec, track: Any) -> None:
    """No candidate may take the name of a configuration the harness adds (`reserved_names`).

    A candidate named `unchecked` in the reviewer track would share every per-name table with
    the built-in baseline (its figures, its record, its gates), so a reader, or a check keyed
    by name, could take one for the other; it is refused instead of being told apart.
    """
    reserved = _hook_names(track, "reserved_names", spec) or set()
    for index, candidate in enumerate(spec.candidates):
        if candidate.name in reserved:
            raise InputError(
                f"candidate name {candidate.name!r} is reserved: track {spec.track_id} adds a "
                "built-in configuration of that name; rename the candidate",
                location=f"candidates/{index}/name",
            )


def _check_gate_values(gate: GateSpec, where: str, *, proportion: bool) -> None:
    """A gate that gates something, against a threshold its figure can take.

    `candidates = []` written out would gate no configuration while reading as a gate (the
    field left out means every configuration); a proportion's threshold outside [0, 1] is one
    no figure can meet or one every figure meets, a typo either way.
    """
    if "candidates" in gate.model_fields_set and not gate.candidates:
        raise InputError(
            "an empty list gates nothing; name configurations, or leave the field out to "
            "gate every one",
            location=f"{where}/candidates",
        )
    if proportion and not 0.0 <= gate.threshold <= 1.0:
        raise InputError(
            f"{gate.metric} is a proportion, so its threshold must lie in [0, 1] (5% is 0.05); "
            f"got {gate.threshold:g}",
            location=f"{where}/threshold",
        )


def check_gates(spec: ExperimentSpec, track: Any) -> None:
    """Gate metrics must be figures the track produces; gate candidates must be its subjects."""
    subjects = _hook_names(track, "subject_names", spec)
    if subjects is None:
        subjects = {c.name for c in spec.candidates}
    declared = _hook_names(track, "figure_names", spec)
    figures = None if declared is None else declared | ALWAYS_PRODUCED
    for index, gate in enumerate(spec.gates):
        if figures is not None and gate.metric not in figures:
            raise InputError(
                f"unknown metric {gate.metric!r} for track {spec.track_id}; it produces: "
                f"{', '.join(sorted(figures))}",
                location=f"gates/{index}/metric",
            )
        proportion = figures is not None or gate.metric in ALWAYS_PRODUCED
        _check_gate_values(gate, f"gates/{index}", proportion=proportion)
        for name in gate.candidates:
            if name not in subjects:
                raise InputError(
                    f"gate names {name!r}, which is not a configuration of this experiment "
                    f"(known: {', '.join(sorted(subjects))})",
                    location=f"gates/{index}/candidates",
                )


def check_references(spec: ExperimentSpec, base_dir: Path) -> None:
    """Every run folder a spec refers to must exist now and hold the manifest it pins.

    A human participant's `recommendation` names an earlier run and its manifest hash; a spec
    pinning a folder that does not exist (or a hash of 64 zeros) would freeze, and fail only
    when the participant is served. The manifest's own hash is recomputed here (as
    `read_manifest` does; that module imports this one).
    """
    for index, candidate in enumerate(spec.candidates):
        participant = candidate.participant
        recommendation = participant.recommendation if participant is not None else None
        if recommendation is None:
            continue
        where = f"/candidates/{index}/participant/recommendation"
        run = Path(recommendation.run)
        folder = run if run.is_absolute() else base_dir / run
        path = folder / "manifest.json"
        if not folder.is_dir():
            raise InputError(f"run folder {recommendation.run!r} does not exist", location=where)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            stored = data.pop("manifest_sha256")
        except (OSError, ValueError, RecursionError, AttributeError, KeyError, TypeError):
            raise InputError(
                f"run folder {recommendation.run!r} holds no readable manifest.json",
                location=where,
            ) from None
        if stored != json_sha256(data):
            raise InputError(
                f"the manifest.json of {recommendation.run!r} changed after its freeze",
                location=where,
            )
        if stored != recommendation.manifest_sha256:
            raise InputError(
                f"manifest_sha256 {recommendation.manifest_sha256[:12]}… is not the manifest of "
                f"{recommendation.run!r} ({stored[:12]}…)",
                location=where,
            )


def located_in_spec(error: InputError, source: str) -> InputError:
    """`error` located in the spec file when its location is a pointer into the spec.

    The freeze's checks and a track's `resolve` name the field they refuse as a pointer into
    the spec (`gates/0/metric`, `/candidates/0/participant/recommendation`) without knowing
    the file; the message then reads `SPEC#/gates/0/metric: ...`, as a validation error's
    does. Any other location (a corpus file, a run folder, `SPEC#/...` already) is kept.
    """
    location = (error.location or "").lstrip("/")
    if "#" in location or location.partition("/")[0] not in ExperimentSpec.model_fields:
        return error
    return type(error)(error.message, location=f"{source}#/{location}")


@contextmanager
def in_spec(source: str) -> Iterator[None]:
    """Within: an `InputError` pointing into the spec is re-raised located in `source`."""
    try:
        yield
    except InputError as error:
        raise located_in_spec(error, source) from None


# ------------------------------------------------------------------------------------------------
# The usual plan, every case x candidate x trial index, made on demand rather than held.
#
# A million-trial reviewer plan held as `TrialKey` objects, and the trial ids its digest is
# computed over, took about 270 MB of `report` (issue 30: `verify` and `report` re-plan every run
# to check it against the frozen digest). `CrossProduct` is a read-only sequence of the same keys,
# in the same order, made one at a time; and for the digest it gives the trial ids already in
# sorted order (`sorted_trial_ids`), so `plan_record` need not hold or sort them.


class _KeysOnDemand(Sequence[TrialKey]):
    """A read-only sequence of keys made one at a time by `_key(position)` (indexes, slices)."""

    __slots__ = ()

    def _key(self, position: int) -> TrialKey:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> TrialKey: ...

    @overload
    def __getitem__(self, index: slice) -> list[TrialKey]: ...

    def __getitem__(self, index: int | slice) -> TrialKey | list[TrialKey]:
        if isinstance(index, slice):
            return [self._key(i) for i in range(*index.indices(len(self)))]
        size = len(self)
        position = index + size if index < 0 else index
        if not 0 <= position < size:
            raise IndexError("plan index out of range")
        return self._key(position)


class CrossProduct(_KeysOnDemand):
    """Keys `(case, candidate, index)` for every case, then candidate, then index (in order)."""

    __slots__ = ("_cases", "_names", "_trials")

    def __init__(self, case_ids: Sequence[str], candidates: Sequence[str], trials: int) -> None:
        self._cases = tuple(case_ids)
        self._names = tuple(candidates)
        self._trials = max(trials, 0)

    def __len__(self) -> int:
        return len(self._cases) * len(self._names) * self._trials

    def _key(self, position: int) -> TrialKey:
        case, rest = divmod(position, len(self._names) * self._trials)
        name, trial = divmod(rest, self._trials)
        return TrialKey(self._cases[case], self._names[name], trial)

    def __iter__(self) -> Iterator[TrialKey]:
        indexes = range(self._trials)
        for case_id in self._cases:
            for name in self._names:
                for index in indexes:
                    yield TrialKey(case_id, name, index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]

    __hash__ = None  # type: ignore[assignment]  # equal to a list of the same keys, like a list

    def __repr__(self) -> str:
        return f"CrossProduct({len(self._cases)} cases x {self._names!r} x {self._trials})"

    @property
    def case_ids(self) -> tuple[str, ...]:
        """The cases, in plan order."""
        return self._cases

    @property
    def candidates(self) -> tuple[str, ...]:
        """The candidates' names, in plan order."""
        return self._names

    @property
    def trials(self) -> int:
        """Trial indexes per case and candidate (`0 .. trials - 1`)."""
        return self._trials

    def sorted(self) -> CrossProduct:
        """The same keys in `sorted()` order, still made on demand.

        `TrialKey` orders by case, then candidate, then index, so the sorted plan is the plan of
        the sorted cases and sorted candidates (each listed once in a plan).
        """
        return CrossProduct(sorted(self._cases), sorted(self._names), self._trials)

    def sorted_trial_ids(self) -> Iterator[str] | None:
        """Every trial id (`case/candidate/index`) in `sorted()` order, or None when unsafe.

        The ids of one (case, candidate) share the prefix `case/candidate/` and differ in their
        digits. When no prefix equals or begins another (names may hold "/"), two ids of
        different prefixes compare as their prefixes do, so the sorted ids are the sorted
        prefixes, each followed by the sorted index texts, and none repeats. Otherwise None:
        the caller sorts the ids themselves (and finds any duplicate).
        """
        prefixes = sorted(f"{case}/{name}/" for case in self._cases for name in self._names)
        if any(b.startswith(a) for a, b in itertools.pairwise(prefixes)):
            return None
        suffixes = sorted(str(index) for index in range(self._trials))
        return (prefix + suffix for prefix in prefixes for suffix in suffixes)

    def ids_sha256(self) -> str | None:
        """`json_sha256(sorted(ids))`, streamed over `sorted_trial_ids`; None where not exact."""
        ordered = self.sorted_trial_ids()
        return None if ordered is None else sorted_ids_sha256(ordered)


def sorted_ids_sha256(ordered: Iterable[str]) -> str | None:
    """`json_sha256(list(ordered))` for trial ids already sorted, streamed (none is held).

    The canonical JSON of a list of strings is `[`, the strings encoded as `canonical_json`
    encodes them (the C string encoder) joined by `,`, then `]`. None for a string that
    encoder refuses (a lone surrogate): the caller takes the general path.
    """
    digest = hashlib.sha256(b"[")
    ids = iter(ordered)
    separator = ""
    try:
        # Joined a few thousand at a time: one update per id was half of the cost.
        while encoded := [encode_basestring(trial_id) for trial_id in itertools.islice(ids, 4096)]:
            digest.update((separator + ",".join(encoded)).encode("utf-8"))
            separator = ","
    except UnicodeEncodeError:
        return None
    digest.update(b"]")
    return digest.hexdigest()


class SeededOrder(_KeysOnDemand):
    """A plan in its seeded interleaved order, held as 4 bytes a trial (issue 30).

    `trial_order` sorts the keys and shuffles them with `Random(seed)`. A shuffle's swaps depend
    only on the length and the generator, so shuffling the positions `0 .. n-1` instead gives
    the same permutation: key `p` of the order is `sorted_plan[permutation[p]]`. A
    `CrossProduct` plan stays made on demand (its sorted form is one too), so a run of a million
    trials holds a 4 MB array, not a million keys.
    """

    __slots__ = ("_permutation", "_sorted")

    def __init__(self, keys: Sequence[TrialKey], seed: int) -> None:
        self._sorted: Sequence[TrialKey] = (
            keys.sorted() if isinstance(keys, CrossProduct) else sorted(keys)
        )
        permutation = array("I", range(len(self._sorted)))
        random.Random(seed).shuffle(permutation)  # pyright: ignore[reportArgumentType]
        self._permutation = permutation

    def __len__(self) -> int:
        return len(self._permutation)

    def _key(self, position: int) -> TrialKey:
        return self._sorted[self._permutation[position]]

    def __iter__(self) -> Iterator[TrialKey]:
        return (self._sorted[i] for i in self._permutation)


def trial_order(keys: Sequence[TrialKey], seed: int) -> list[TrialKey]:
    """The seeded interleaved order: sort for a stable start, then shuffle with `seed`."""
    ordered = sorted(keys)
    random.Random(seed).shuffle(ordered)
    return ordered


def cross_product(case_ids: list[str], manifest: Manifest) -> CrossProduct:
    """Plan every case for every candidate, `trials_per_case` times (the usual plan).

    Args:
        case_ids: The cases of the corpus.
        manifest: The frozen manifest (its spec gives candidates and trial count).

    Returns:
        One key per (case, candidate, trial index), made as it is read (`CrossProduct`).
    """
    spec = manifest.spec
    return CrossProduct(case_ids, [c.name for c in spec.candidates], spec.trials_per_case)


def handed_out(
    order: Sequence[TrialKey], positions: Iterable[int], stopped: Mapping[str, str]
) -> Iterator[tuple[int, TrialKey]]:
    """The remaining trials in order, each key made as its trial is handed out.

    A stopped candidate's trials are skipped as they come up and stay unrun ("not run"); no
    key is held past its trial (the run keeps the order's 4 bytes a trial and the trials in
    flight).
    """
    for position in positions:
        key = order[position]
        if key.candidate not in stopped:
            yield position, key


# ------------------------------------------------------------------------------------------------
# What the software environment was: package, Python, dependency versions and git state.

KEY_DEPENDENCIES: tuple[str, ...] = (
    "aiohttp",
    "cedarpy",
    "jinja2",
    "jsonschema",
    "matplotlib",
    "numpy",
    "pydantic",
    "rfc8785",
    "rich",
    "scipy",
    "statsmodels",
    "torch",
    "typer",
)
"""Distributions whose versions can change results or records; recorded when installed."""


class GitState(BaseModel):
    """The trustbench source checkout a run used, when it is a git checkout."""

    model_config = documented(extra="forbid", frozen=True)

    commit: str
    """HEAD commit id."""
    dirty: bool
    """True when tracked files differ from HEAD: the commit alone does not reproduce the code."""


class EnvironmentRecord(BaseModel):
    """Software environment of the freeze."""

    model_config = documented(extra="forbid", frozen=True)

    trustbench_version: str
    """Version of the trustbench package."""
    python: str
    """Python version, e.g. `3.11.7`."""
    python_implementation: str
    """e.g. `CPython`."""
    platform: str
    """Operating system and machine architecture (no host name)."""
    dependencies: dict[str, str | None]
    """Version of each key dependency; null when not installed."""
    git: GitState | None
    """Git state of the trustbench source; null outside a git checkout or without git."""
    trustbench_source_sha256: str | None = None
    """Digest of the trustbench package's own source (`package_source_sha256`); null in
    manifests frozen before it was recorded, or when a source file could not be read."""

    def froze_with_running_code(self) -> bool:
        """True when the freeze ran exactly the trustbench source this process runs.

        A re-check may skip repeating a check the freeze ran only when the checking code is the
        same: `trustbench_version` stays the same across development commits, so a corpus
        frozen by older, laxer validation would pass on its version alone. No recorded digest
        (an older manifest) never matches, so such a manifest is re-checked in full.
        """
        recorded = self.trustbench_source_sha256
        return recorded is not None and recorded == package_source_sha256()


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(source: Path) -> GitState | None:
    """Return the commit and dirty flag of the checkout holding `source`, or None."""
    commit = _git(["rev-parse", "HEAD"], source)
    if commit is None:
        return None
    status = _git(["status", "--porcelain", "--untracked-files=no"], source)
    return GitState(commit=commit.strip(), dirty=bool(status and status.strip()))


def _version(distribution: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version  # at freeze only, not at run

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def python_source_sha256(package: Path) -> str | None:
    """SHA-256 of the `.py` files under `package`, by path and bytes; None if one is unreadable.

    The canonical JSON of {path relative to `package`, POSIX: SHA-256 of the file's bytes}, keys
    sorted, so the order is fixed. Data files and `__pycache__` are left out: the corpus files a
    check reads (cases, schemas, prompt) are pinned in the manifest file by file anyway.
    """
    sources = (path for path in package.rglob("*.py") if "__pycache__" not in path.parts)
    try:
        hashes = {path.relative_to(package).as_posix(): file_sha256(path) for path in sources}
    except OSError:
        return None
    return json_sha256(hashes)


@functools.cache
def package_source_sha256() -> str | None:
    """`python_source_sha256` of the running trustbench package, computed once per process.

    Freeze records it and a review run's re-check (`run`, `report`, `verify`) compares it:
    median 16 ms, 12-25 ms, for the package's 239 files, 3.8 MB (4-6 ms finding them, 5 ms
    reading and hashing them; 2-core machine under load, 2026-12-06). That is about 1 % of a
    `report`'s 1.3-1.9 s, and a tenth of the 0.15 s of re-validation it lets a run skip.
    """
    return python_source_sha256(Path(trustbench.__file__).resolve().parent)


def capture_environment() -> EnvironmentRecord:
    """Record the environment this process runs in."""
    return EnvironmentRecord(
        trustbench_version=trustbench.__version__,
        python=platform.python_version(),
        python_implementation=platform.python_implementation(),
        platform=f"{platform.system()}-{platform.machine()}",
        dependencies={name: _version(name) for name in KEY_DEPENDENCIES},
        git=git_state(Path(trustbench.__file__).resolve().parent),
        trustbench_source_sha256=package_source_sha256(),
    )


MANIFEST_FORMAT = "trustbench.manifest/1"
"""Format id written into every manifest."""
MANIFEST_FILE = "manifest.json"
"""Name of the manifest in a run folder."""


class _Record(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class FileRecord(_Record):
    """One hashed input of the experiment."""

    role: str
    """What the track uses it for (`corpus`, `schema`, `prompt`, `candidate_code`, ...)."""
    name: str
    """Portable name, unique per role (a path relative to the corpus root, or a prompt id)."""
    kind: Literal["file", "text"]
    """`file`: bytes on disk; `text`: an inline text given by the track."""
    sha256: str
    """SHA-256 of the file's bytes or the text's UTF-8 bytes."""
    size: int
    """Size in bytes."""


class TrackRecord(_Record):
    """Which track code the experiment runs."""

    id: str
    """Registry key `suite/track`."""
    entry: str
    """Import string the track was loaded from."""


class CorpusRecord(_Record):
    """Where the corpus was found and its own version label."""

    version: str | None
    """The corpus's version label, if it declares one."""
    root: str
    """`builtin:<label>` or the absolute corpus folder."""


class CandidateRecord(_Record):
    """A candidate as resolved for the record (no secret values)."""

    name: str
    """Candidate name."""
    kind: str
    """Candidate kind."""
    requested_model: str | None
    """Model id requested from the API (None for in-process candidates)."""
    endpoint: str | None
    """Base URL called (None for in-process candidates)."""
    api_key_env: str | None
    """Name (never value) of the environment variable holding the API key."""
    entry: str | None
    """In-process factory import string."""
    adaptations: list[str]
    """How the provider adapts the provider-neutral request to its API."""


class PlanRecord(_Record):
    """The frozen trial plan."""

    trials: int
    """Number of planned trials (cases x candidates x trials_per_case for the usual plan)."""
    cases: int
    """Number of distinct cases."""
    keys_sha256: str
    """SHA-256 of the sorted list of trial ids; `run` refuses a plan that differs."""


class Manifest(_Record):
    """Everything a run is frozen to; `manifest_sha256` is its canonical hash."""

    format: Literal["trustbench.manifest/1"]
    """Format id."""
    spec: ExperimentSpec
    """The validated spec with every default made explicit."""
    spec_file: str
    """File name of the spec that was frozen."""
    spec_sha256: str
    """SHA-256 of the spec file's bytes."""
    base_dir: str
    """Absolute folder of the spec file; relative corpus paths resolve against it."""
    track: TrackRecord
    """Track code."""
    corpus: CorpusRecord
    """Corpus location and version."""
    files: list[FileRecord]
    """Every file and prompt the experiment depends on, hashed."""
    candidates: list[CandidateRecord]
    """Candidates as resolved (requested model ids, endpoints, key variable names)."""
    plan: PlanRecord
    """The frozen plan."""
    environment: EnvironmentRecord
    """Software environment of the freeze."""
    manifest_sha256: str
    """SHA-256 of the canonical JSON of this manifest without this field."""

    def file_sha(self) -> dict[tuple[str, str], str]:
        """Map `(role, name)` to SHA-256 for every hashed input."""
        return {(item.role, item.name): item.sha256 for item in self.files}


def hash_items(items: list[ResolvedItem]) -> list[FileRecord]:
    """Hash every resolved item (file bytes, as the track read them when it says so, or text)."""
    records: list[FileRecord] = []
    seen: set[tuple[str, str]] = set()
    for item in items:
        if (item.role, item.name) in seen:
            raise InputError(f"track resolved {item.role} {item.name!r} twice")
        seen.add((item.role, item.name))
        if item.path is None:
            data = (item.text or "").encode("utf-8")
            kind, sha256, size = "text", sha256_hex(data), len(data)
        elif item.data is not None:  # the bytes the track read and checked
            kind, sha256, size = "file", sha256_hex(item.data), len(item.data)
        else:
            try:
                sha256, size = file_digest(item.path)
            except (FileNotFoundError, NotADirectoryError):
                raise InputError(f"{item.role} file not found", location=str(item.path)) from None
            kind = "file"
        records.append(
            FileRecord(role=item.role, name=item.name, kind=kind, sha256=sha256, size=size)
        )
    return sorted(records, key=lambda record: (record.role, record.name))


def resolve_inputs(
    track: Track, spec: ExperimentSpec, base_dir: Path, frozen: Manifest | None = None
) -> tuple[Resolution, list[FileRecord]]:
    """Ask the track what the spec depends on, add in-process candidate code, and hash it all.

    Candidate code is found and hashed without being imported (`entry_code_items`), so `verify`
    and `report` never run it and `run` compares it with the manifest before importing it; only
    a freeze (`frozen` None) imports the entry, to refuse one that names no factory.

    With `frozen` (the manifest of an experiment being re-checked), a track that defines the
    optional `resolve_frozen(manifest)` is asked through it instead: it may skip repeating
    checks the freeze already ran on unchanged inputs. The hashes are compared either way.
    """
    resolve_frozen: Callable[[Manifest], Resolution] | None = getattr(track, "resolve_frozen", None)
    if frozen is not None and callable(resolve_frozen):
        resolution = resolve_frozen(frozen)
    else:
        resolution = track.resolve(spec, base_dir)
    # A package shared by several factories (a track's own, and the core loop's) is hashed once.
    items = [item for item in resolution.items if item.role != CODE_ROLE]
    package = {item.name: item for item in resolution.items if item.role == CODE_ROLE}
    entries: set[str] = set()
    candidate_entries = [
        (candidate.entry, f"candidate {candidate.name}", True)
        for candidate in spec.candidates
        if candidate.entry
    ]
    track_entries = [(entry, where, False) for entry, where in resolution.code_entries]
    for entry, where, is_factory in candidate_entries + track_entries:
        # Several candidates may share one factory (e.g. built-in reviewers with different
        # settings): its code is hashed once, and a package shared by factories once.
        if entry in entries:
            continue
        entries.add(entry)
        if frozen is None and is_factory:  # freeze checks it names a factory; nothing else
            load_factory(entry, where)  # imports it (a track checks its own entries)
        entry_file, *code = entry_code_items(entry, where)
        items.append(entry_file)
        package.update((item.name, item) for item in code)
    return resolution, hash_items(items + list(package.values()))


def plan_record(keys: Sequence[TrialKey], spec: ExperimentSpec) -> PlanRecord:
    """Check a plan against the spec and summarise it for the manifest."""
    names = {candidate.name for candidate in spec.candidates}
    if isinstance(keys, CrossProduct):
        digest = keys.ids_sha256()
        possible = set(keys.candidates) <= names and keys.trials <= spec.trials_per_case
        # The same digest without holding the trial ids; an impossible plan takes the general
        # path below, which names its first impossible trial.
        if digest is not None and possible:
            cases = len(set(keys.case_ids)) if len(keys) else 0
            return PlanRecord(trials=len(keys), cases=cases, keys_sha256=digest)
    ids = [key.trial_id for key in keys]
    if len(set(ids)) != len(ids):
        raise InputError("the track planned the same trial twice")
    for key in keys:
        if key.candidate not in names or not 0 <= key.trial_index < spec.trials_per_case:
            raise InputError(f"the track planned an impossible trial {key.trial_id}")
    return PlanRecord(
        trials=len(keys),
        cases=len({key.case_id for key in keys}),
        keys_sha256=json_sha256(sorted(ids)),
    )


def _candidate_records(spec: ExperimentSpec) -> list[CandidateRecord]:
    """What the manifest keeps of each candidate, field by field.

    Spelled out rather than copied by name (`from_same_named`): the manifest must never hold a
    secret, so a field a later spec gains (settings, headers) reaches it only when named here.
    """
    from trustbench.core._context import provider_adaptations

    return [
        CandidateRecord(
            name=c.name,
            kind=c.kind,
            requested_model=c.model,
            endpoint=c.base_url,
            api_key_env=c.api_key_env,
            entry=c.entry,
            adaptations=list(provider_adaptations(c)),
        )
        for c in spec.candidates
    ]


def _assert_no_secret(data: bytes, spec: ExperimentSpec) -> None:
    for candidate in spec.candidates:
        value = os.environ.get(candidate.api_key_env or "")
        if value and len(value) >= 4 and value.encode("utf-8") in data:
            raise InputError(
                f"the value of ${candidate.api_key_env} appears in the manifest; remove it "
                "from the spec (keys are given only by variable name)",
                location=f"candidate {candidate.name}",
            )


def build_manifest(
    spec_path: Path, *, base_dir: Path | None = None, allow_missing_keys: bool = False
) -> Manifest:
    """Freeze a spec file into a manifest (in memory).

    Args:
        spec_path: The experiment spec (TOML, or JSON when named `*.json`).
        base_dir: Folder that relative paths in the spec (a corpus, a prompt) are relative to;
            default: the spec file's folder.
        allow_missing_keys: Freeze even when an `api_key_env` variable is unset here (the run
            machine will have it); by default an unset variable is refused now, not at run time.

    Returns:
        The manifest with its hash.

    Raises:
        InputError: a name in the spec means nothing (unknown gate metric or candidate, unset
            key variable, or what the track's `resolve` refuses), naming the field.
    """
    spec = load_spec(spec_path)
    base_dir = (base_dir or spec_path.parent).resolve()
    with in_spec(str(spec_path)):  # a check's `gates/0/metric` reads SPEC#/gates/0/metric
        check_api_keys(spec, allow_missing=allow_missing_keys)
        check_references(spec, base_dir)
        track, entry = load_track(spec.track_id)
        refuse_unused_resample(spec, track, source=str(spec_path))
        resolution, files = resolve_inputs(track, spec, base_dir)
        check_names(spec, track)
    body = {
        "format": MANIFEST_FORMAT,
        "spec": spec.model_dump(mode="json"),
        "spec_file": spec_path.name,
        "spec_sha256": file_sha256(spec_path),
        "base_dir": str(base_dir),
        "track": {"id": spec.track_id, "entry": entry},
        "corpus": {"version": resolution.corpus_version, "root": resolution.corpus_root},
        "files": [record.model_dump(mode="json") for record in files],
        "candidates": [record.model_dump(mode="json") for record in _candidate_records(spec)],
        "plan": {"trials": 0, "cases": 0, "keys_sha256": ""},
        "environment": capture_environment().model_dump(mode="json"),
        "manifest_sha256": "",
    }
    provisional = Manifest.model_validate(body)
    body["plan"] = plan_record(track.plan(provisional), spec).model_dump(mode="json")
    del body["manifest_sha256"]
    canonical = canonical_json(body)
    _assert_no_secret(canonical, spec)
    body["manifest_sha256"] = sha256_hex(canonical)
    return Manifest.model_validate(body)


def write_manifest(manifest: Manifest, run_dir: Path) -> Path:
    """Write `manifest.json` into `run_dir`; an identical manifest already there is kept.

    Raises:
        InputError: when `run_dir` already holds a different manifest, is a file, or takes the
            name of another run's own file (`RUN/ledger.head`).
    """
    check_new_run_folder(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / MANIFEST_FILE
    if path.exists():
        existing = read_manifest(run_dir)
        if existing.manifest_sha256 != manifest.manifest_sha256:
            raise InputError(
                "already holds a different frozen manifest; freeze into a new run folder",
                location=str(path),
            )
        return path
    text = json.dumps(manifest.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
    write_atomically(path, text.encode("utf-8"))
    return path


def freeze_manifest(manifest: Manifest, run_dir: Path, reason: str = "") -> tuple[Path, list[str]]:
    """The track's `on_freeze` hook, then `write_manifest`; returns the path and the notes.

    Every freeze (the CLI's and `run_spec`'s) goes through here, so a track that must record a
    freeze (a sealed held-out corpus counts its exposures) sees each one. The hook runs before
    the manifest is written, so a freeze it refuses writes nothing; a folder holding another
    experiment is refused before the hook is asked. `reason` (`freeze --reason`) is handed to
    the hook: why an exception the track allows only with a reason is taken.
    """
    existing = run_dir / MANIFEST_FILE
    if existing.exists() and read_manifest(run_dir).manifest_sha256 != manifest.manifest_sha256:
        write_manifest(manifest, run_dir)  # refuses, naming the folder
    check_isolation(manifest.spec)  # a machine without the sandbox refuses before anything
    track, _ = load_track(manifest.track.id)
    notes = track_hook(track, "on_freeze", manifest, run_dir, reason=reason)
    return write_manifest(manifest, run_dir), notes


def read_manifest(run_dir: Path) -> Manifest:
    """Read `manifest.json` and check its hash against its content.

    Raises:
        InputError: when the file is missing or not a regular file.
        CheckFailed: when it is unparsable or no longer matches `manifest_sha256`.
    """
    path = run_dir / MANIFEST_FILE
    raw = read_input_file(path, missing="no manifest.json: run `trustbench freeze` first")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise CheckFailed(f"manifest.json is not valid JSON: {error}", location=str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("manifest_sha256"), str):
        raise CheckFailed("manifest.json has no manifest_sha256", location=str(path))
    stored = data.pop("manifest_sha256")
    actual = json_sha256(data)
    if actual != stored:
        raise CheckFailed(
            f"manifest.json changed after freeze (recorded sha256 {stored[:12]}…, "
            f"content now hashes to {actual[:12]}…)",
            location=str(path),
        )
    data["manifest_sha256"] = stored
    try:
        return Manifest.model_validate(data)
    except ValidationError as error:
        raise CheckFailed(
            f"manifest.json is not a valid manifest: {error}", location=str(path)
        ) from None


def check_inputs(manifest: Manifest, track: Track) -> Sequence[TrialKey]:
    """Re-resolve and re-hash every input; refuse if anything changed since the freeze.

    Returns:
        The track's plan, checked against the frozen plan digest.

    Raises:
        CheckFailed: naming the first file added, removed or changed.
    """
    _, files = resolve_inputs(track, manifest.spec, Path(manifest.base_dir), manifest)
    now = {(f.role, f.name): f.sha256 for f in files}
    frozen = manifest.file_sha()
    for key in sorted(frozen.keys() | now.keys()):
        role, name = key
        if key not in now:
            raise CheckFailed(f"{role} file {name} was removed after freeze", location=name)
        if key not in frozen:
            raise CheckFailed(f"{role} file {name} was added after freeze", location=name)
        if now[key] != frozen[key]:
            raise CheckFailed(
                f"{role} file {name} changed after freeze (sha256 {frozen[key][:12]}… is now "
                f"{now[key][:12]}…)",
                location=name,
            )
    keys = track.plan(manifest)
    if plan_record(keys, manifest.spec) != manifest.plan:
        raise CheckFailed("the track's trial plan differs from the frozen plan", location="plan")
    return keys
