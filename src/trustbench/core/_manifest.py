"""The frozen manifest: the spec plus everything it resolves to, with its own SHA-256.

`freeze` writes `manifest.json` before anything runs. Its hash is the SHA-256 of the canonical
(RFC 8785) JSON of the manifest without the `manifest_sha256` field; it anchors the ledger's hash
chain. The manifest holds no time stamp, so freezing the same inputs twice gives the same hash.
It never holds a secret: API keys appear only as the *name* of an environment variable, and
`freeze` refuses to write a manifest in which the value of any such variable appears.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from trustbench._canonical import (
    canonical_json,
    file_digest,
    file_sha256,
    json_sha256,
    read_input_file,
    sha256_hex,
)
from trustbench.core._candidate_code import ROLE as CODE_ROLE
from trustbench.core._candidate_code import entry_code_items, load_factory
from trustbench.core._environment import EnvironmentRecord, capture_environment
from trustbench.core._freeze_checks import check_api_keys, check_names, check_references, in_spec
from trustbench.core._outputs import check_new_run_folder, write_atomically
from trustbench.core._plan import CrossProduct
from trustbench.core._registry import load_track
from trustbench.core._spec import ExperimentSpec, load_spec, refuse_unused_resample
from trustbench.core._track import Resolution, ResolvedItem, Track, TrialKey, track_hook
from trustbench.errors import CheckFailed, InputError

MANIFEST_FORMAT = "trustbench.manifest/1"
"""Format id written into every manifest."""
MANIFEST_FILE = "manifest.json"
"""Name of the manifest in a run folder."""


class _Record(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)


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
    from trustbench.core._providers import provider_adaptations

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
