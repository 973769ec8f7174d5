"""Load and validate an RTB corpus folder (a built-in corpus or a user's own).

A corpus folder holds `cases/<case_id>.json`, `schemas/{case,candidate_input,reviewer_response}
.schema.json`, `prompts/review_prompt.md` and `MANIFEST.json`. Validation collects *every* problem
(file + JSON pointer + message) rather than stopping at the first, so one run tells the author
everything to fix; loading refuses a corpus with any problem, so no track ever scores against a
corrupt, tampered or inconsistent answer key. Neither ever writes a file.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, PrivateAttr, SerializeAsAny

from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.corpus._corpus_parts import PROMPT_PATH as PROMPT_PATH
from trustbench.rtb.corpus._corpus_parts import (
    check_schemas,
    load_cases,
    read_manifest,
    read_prompt,
)
from trustbench.rtb.corpus._jsondoc import Problem
from trustbench.rtb.corpus._manifest import (
    MANIFEST_NAME,
    CorpusManifest,
    build_manifest,
    compare_manifest,
    manifest_text,
)
from trustbench.rtb.corpus._snapshot import CorpusSnapshot
from trustbench.rtb.policy._default import DEFAULT_POLICY_ID
from trustbench.rtb.policy._protocol import AuthoredCase
from trustbench.rtb.policy._registry import known_policy_ids, policy_for

BUILTIN_VERSION = "0.1"
"""Version of the default built-in corpus (the starter; data folder `v<version>`)."""

DEFAULT_VERSION = "0.3"
"""The built-in corpus the reviewer-side tools default to: `rtb review --model`, `rtb export`
without `--corpus`, the Inspect interop (which otherwise finds the built-in corpus an export
was made from) and, in the shipped examples, the reviewer and human-review specs. The newest
corpus, whose policy states the conditions platform teams gate on and whose audit adds learned
attackers and rule ablation. The starter (`BUILTIN_VERSION`, the spec's 60 cases) stays the
corpus of the starter checks and of the track demos until they switch; the older corpora stay
shipped, each labelled in `docs/` with its `rtb audit` result (both saturated)."""

BUILTIN_VERSIONS: tuple[str, ...] = tuple(
    sorted(
        folder.name.removeprefix("v")
        for folder in Path(__file__).parent.glob("v*")
        if (folder / "MANIFEST.json").is_file()
    )
)
"""Every corpus version shipped inside the package: one data folder `v<version>` each."""


def builtin_corpus_root(version: str = BUILTIN_VERSION) -> Path:
    """Folder of a built-in corpus (package data); default the starter."""
    return Path(__file__).parent / f"v{version.removeprefix('v')}"


if TYPE_CHECKING:
    AuthoredCases = list[AuthoredCase]
else:
    # Each case is an instance of its policy's own case model, so pydantic holds (and serializes)
    # them as the models they are; `AuthoredCase` says what the harness may read of any of them.
    AuthoredCases = list[SerializeAsAny[BaseModel]]


class ValidationReport(BaseModel):
    """Everything `validate_corpus` found: the problems and what did parse."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    root: Path
    """The corpus folder that was validated."""
    starter: bool
    """Whether the starter-only checks (10 x 6 grid, 20/20/20 split, shared policy) ran: for
    the built-in corpus and for copies whose manifest declares itself the starter."""
    version: str | None
    """Corpus version from `MANIFEST.json`; None when the manifest could not be read."""
    policy_id: str
    """Policy the corpus declares (`DEFAULT_POLICY_ID` when the manifest names none); an unknown
    one is also a problem, and its cases were then read in the default policy's format."""
    cases: AuthoredCases
    """Cases that parsed and matched the schema, in file-name order."""
    problems: list[Problem]
    """Every problem found, in the order checked; empty means the corpus is valid."""
    files: dict[str, str]
    """Relative path -> SHA-256 of every file as found on disk (manifest excluded)."""
    review_prompt: str | None
    """The shared review prompt text; None when it is missing or unreadable."""
    manifest_sha256: str | None
    """SHA-256 of `MANIFEST.json` itself (pins the whole corpus); None when missing."""

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems

    def decision_counts(self) -> dict[str, int]:
        """Reference decision -> number of parsed cases (authored answer key, not results)."""
        return dict(
            sorted(Counter(c.expectations.reference_decision.value for c in self.cases).items())
        )

    def grid(self) -> dict[str, dict[str, list[str]]]:
        """Group -> variant -> reference decisions of the parsed cases in that cell."""
        table: dict[str, dict[str, list[str]]] = {}
        for case in self.cases:
            cell = table.setdefault(case.group, {}).setdefault(case.variant, [])
            cell.append(case.expectations.reference_decision.value)
        return table


class Corpus(BaseModel):
    """A validated corpus, ready for export and grading."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    version: str
    """Corpus version from `MANIFEST.json`."""
    policy_id: str = DEFAULT_POLICY_ID
    """Policy the corpus declares; its `CorpusPolicy` object (`policy_for`) reads and grades it."""
    root: Path
    """The corpus folder."""
    cases: AuthoredCases
    """All cases, in file-name (= case id) order."""
    review_prompt: str
    """The shared advisory-review prompt (policy and response format; no answer)."""
    files: dict[str, str]
    """Relative path -> SHA-256 of every corpus file (all match `MANIFEST.json`)."""
    manifest_sha256: str
    """SHA-256 of `MANIFEST.json`; record it to pin exactly this corpus in an experiment."""
    _snapshot: CorpusSnapshot | None = PrivateAttr(default=None)
    """The bytes the corpus was parsed and validated from (see `file_data`)."""

    def file_data(self, rel: str) -> bytes | None:
        """The bytes of corpus file `rel` (`MANIFEST.json` included) as they were validated.

        None when unknown (a corpus built by hand, not loaded).
        """
        return None if self._snapshot is None else self._snapshot.data.get(rel)

    def with_snapshot(self, snapshot: CorpusSnapshot) -> Corpus:
        """Remember the bytes this corpus was parsed from and return it (its loaders call this)."""
        self._snapshot = snapshot
        return self

    def case(self, case_id: str) -> AuthoredCase:
        """The case with this id.

        Raises:
            InputError: No case has this id.
        """
        for case in self.cases:
            if case.case_id == case_id:
                return case  # type: ignore[return-value]
        raise InputError(f"no case {case_id!r} in the corpus at {self.root}")


def resolve_root(path: Path | None) -> tuple[Path, bool]:
    root = builtin_corpus_root() if path is None else Path(path)
    if not root.is_dir():
        raise InputError(f"corpus folder not found: {root}")
    return root, root.resolve() == builtin_corpus_root().resolve()


def validate_corpus(
    path: Path | None = None,
    *,
    starter: bool | None = None,
    check_manifest: bool = True,
    policy_id: str | None = None,
    snapshot: CorpusSnapshot | None = None,
) -> ValidationReport:
    """Validate a corpus folder and report every problem; never writes anything.

    Args:
        path: Corpus folder; None for the built-in starter.
        starter: Run the starter-only checks (grid, split, shared policy). Default: for the
            built-in corpus and any copy whose manifest declares `starter`; a user corpus may
            have any size and any groups.
        check_manifest: Compare files and counts against `MANIFEST.json` (off only while the
            manifest is being rewritten).
        policy_id: Check against this policy's format instead of the one the manifest declares
            (used while a manifest is being written for a new corpus).
        snapshot: The folder's files as already read (`CorpusSnapshot.take`); default: read
            now. Every check and every hash in the report comes from these bytes.

    Returns:
        The report; `report.ok` is False when any problem was found.

    Raises:
        InputError: The folder does not exist, or a file in it cannot be read.
    """
    root, is_builtin = resolve_root(path)
    if snapshot is None:
        snapshot = CorpusSnapshot.take(root)
    problems: list[Problem] = []
    manifest = read_manifest(snapshot, problems)
    declared_policy = policy_id or (manifest.policy_id if manifest else None) or DEFAULT_POLICY_ID
    if declared_policy not in known_policy_ids():
        problems.append(
            Problem(
                file=MANIFEST_NAME,
                pointer="/policy_id",
                message=f"policy {declared_policy!r} is not implemented by trustbench (known: "
                f"{', '.join(known_policy_ids())}); its cases cannot be checked or graded",
            )
        )
    policy = policy_for(declared_policy if declared_policy in known_policy_ids() else None)
    declared = manifest is not None and manifest.starter
    run_starter = (is_builtin or declared) if starter is None else starter
    case_files = load_cases(snapshot, problems, policy)
    check_schemas(snapshot, problems, policy)
    prompt = read_prompt(snapshot, problems)
    problems += policy.check_cases(case_files)
    all_parsed = len(case_files) == len(list((root / "cases").glob("*.json")))
    starter_problems = (
        policy.check_starter(case_files, prompt, complete=all_parsed) if run_starter else None
    )
    run_starter = starter_problems is not None  # a policy without a starter contract: no checks
    problems += starter_problems or []
    cases = [case for _, case in case_files]
    if manifest is not None and run_starter and manifest.version != BUILTIN_VERSION:
        problems.append(
            Problem(
                file=MANIFEST_NAME,
                pointer="/version",
                message=f"built-in corpus version must be {BUILTIN_VERSION!r}, "
                f"found {manifest.version!r}",
            )
        )
    files = snapshot.file_hashes()
    if check_manifest:
        if manifest is None and not (root / MANIFEST_NAME).exists():
            problems.append(
                Problem(
                    file=MANIFEST_NAME,
                    message="missing; write it with `trustbench rtb manifest --corpus DIR "
                    "--version V`",
                )
            )
        elif manifest is not None:
            problems += compare_manifest(manifest, files, cases if all_parsed else None)
    return ValidationReport(
        root=root,
        starter=run_starter,
        version=manifest.version if manifest else None,
        policy_id=declared_policy,
        cases=cases,
        problems=problems,
        files=files,
        review_prompt=prompt,
        manifest_sha256=snapshot.sha256(MANIFEST_NAME),
    )


def load_corpus(path: Path | None = None) -> Corpus:
    """Load a corpus, refusing one with any validation problem.

    Args:
        path: Corpus folder; None for the built-in starter.

    Returns:
        The validated corpus.

    Raises:
        InputError: The folder does not exist.
        CheckFailed: Validation found problems; the message names the first ones (file and
            JSON pointer) and how to see them all.
    """
    snapshot = CorpusSnapshot.take(resolve_root(path)[0])
    report = validate_corpus(path, snapshot=snapshot)
    if not report.ok:
        raise CheckFailed(failure_summary(report))
    if not (report.version and report.review_prompt is not None and report.manifest_sha256):
        raise CheckFailed(f"{report.root}: corpus validated but its manifest or prompt is missing")
    return Corpus(
        version=report.version,
        policy_id=report.policy_id,
        root=report.root,
        cases=report.cases,
        review_prompt=report.review_prompt,
        files=report.files,
        manifest_sha256=report.manifest_sha256,
    ).with_snapshot(snapshot)


def failure_summary(report: ValidationReport, limit: int = 5) -> str:
    """One message naming the first problems of a failed validation, with full file paths."""
    lines = [f"corpus at {report.root} has {len(report.problems)} problem(s):"]
    lines += [f"  {report.root}/{p}" for p in report.problems[:limit]]
    if len(report.problems) > limit:
        lines.append(
            f"  ... and {len(report.problems) - limit} more (see `trustbench rtb validate`)"
        )
    return "\n".join(lines)


def write_manifest(
    path: Path | None = None, version: str | None = None, policy_id: str | None = None
) -> CorpusManifest:
    """Rewrite `MANIFEST.json` for a corpus whose files are otherwise valid.

    Args:
        path: Corpus folder; None for the built-in starter.
        version: Corpus version to record; default: the version in the existing manifest.
        policy_id: Policy the corpus follows; default: the one in the existing manifest (none:
            `DEFAULT_POLICY_ID`, recorded by leaving the field out).

    Returns:
        The manifest written.

    Raises:
        InputError: No version given and none readable from an existing manifest.
        CheckFailed: The corpus has problems other than its manifest; nothing is written, so a
            manifest never certifies a broken corpus.
    """
    snapshot = CorpusSnapshot.take(resolve_root(path)[0])  # the bytes the manifest certifies
    previous = read_manifest(snapshot, [])
    chosen_policy = policy_id or (previous.policy_id if previous is not None else None)
    report = validate_corpus(path, check_manifest=False, policy_id=chosen_policy, snapshot=snapshot)
    problems = [p for p in report.problems if p.file != MANIFEST_NAME]
    if problems:
        raise CheckFailed(failure_summary(report.model_copy(update={"problems": problems})))
    chosen = version or report.version
    if not chosen:
        raise InputError(f"{report.root / MANIFEST_NAME}: no corpus version; pass --version")
    if report.starter and chosen != BUILTIN_VERSION:
        raise InputError(f"the built-in corpus is version {BUILTIN_VERSION}, not {chosen!r}")
    starter = report.starter or (previous is not None and previous.starter)
    recorded = None if chosen_policy in (None, DEFAULT_POLICY_ID) else chosen_policy
    manifest = build_manifest(
        report.files, chosen, report.cases, starter=starter, policy_id=recorded
    )
    (report.root / MANIFEST_NAME).write_text(manifest_text(manifest), encoding="utf-8")
    return manifest
