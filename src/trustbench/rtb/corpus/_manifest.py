"""`MANIFEST.json`: the SHA-256 of every corpus file, the corpus version and its case counts.

The manifest pins a corpus: a frozen experiment records the manifest's own hash, and the validator
recomputes every file's hash so that a file changed after the manifest was written is reported
instead of silently scored. The manifest is written by `trustbench rtb manifest`, never by the
validator or the loader.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from trustbench.rtb.corpus._problem import Problem, json_pointer
from trustbench.rtb.policy._protocol import AuthoredCase

MANIFEST_NAME = "MANIFEST.json"
"""File name of the manifest at a corpus root."""

MANIFEST_FORMAT = "trustbench-rtb-corpus"
"""Value of the manifest's `format` field: says what kind of folder this is."""


class CorpusCounts(BaseModel):
    """How many cases the corpus holds, by reference decision, group and variant."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid")

    cases: int
    """Number of case files."""
    by_decision: dict[str, int]
    """Reference decision -> number of cases (authored answer key, not observed results)."""
    by_group: dict[str, int]
    """Domain group -> number of cases."""
    by_variant: dict[str, int]
    """Variant -> number of cases."""


class CorpusManifest(BaseModel):
    """The content of `MANIFEST.json`."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid")

    format: Literal["trustbench-rtb-corpus"] = MANIFEST_FORMAT
    """Identifies the folder as an RTB corpus."""
    version: str
    """Corpus version, e.g. `0.1` for the built-in starter."""
    policy_id: str | None = None
    """The policy the corpus's answer key follows; its registered `CorpusPolicy` object fixes the
    case format and the code allowed to grade it. Absent: `DEFAULT_POLICY_ID` (the first starter
    predates this field)."""
    starter: bool = False
    """True for a policy's starter corpus and its copies: the validator then also runs the
    policy's starter checks (`CorpusPolicy.check_starter`: for the first starter the 10 x 6 grid,
    the 20/20/20 split and the shared policy wording). User corpora leave it false."""
    hash_algorithm: Literal["sha256"] = "sha256"
    """Digest used for `files` (hex-encoded)."""
    files: dict[str, str]
    """Relative POSIX path -> SHA-256 of the file's bytes, for every file except the manifest."""
    counts: CorpusCounts
    """Case counts, checked against the cases actually present."""


def corpus_file_paths(root: Path) -> list[str]:
    """Every regular file under `root` except the manifest, as sorted relative POSIX paths.

    Nothing is skipped silently: a stray file is listed so the manifest check reports it.
    """
    return sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() and path.relative_to(root).as_posix() != MANIFEST_NAME
    )


def count_cases(cases: Iterable[AuthoredCase]) -> CorpusCounts:
    """Count cases by reference decision, group and variant (keys sorted for stable output)."""
    case_list = list(cases)
    decisions = Counter(case.expectations.reference_decision.value for case in case_list)
    groups = Counter(case.group for case in case_list)
    variants = Counter(case.variant for case in case_list)
    return CorpusCounts(
        cases=len(case_list),
        by_decision=dict(sorted(decisions.items())),
        by_group=dict(sorted(groups.items())),
        by_variant=dict(sorted(variants.items())),
    )


def build_manifest(
    files: dict[str, str],
    version: str,
    cases: Iterable[AuthoredCase],
    *,
    starter: bool = False,
    policy_id: str | None = None,
) -> CorpusManifest:
    """Build the manifest certifying `files` (path -> SHA-256 of the bytes validated)."""
    return CorpusManifest(
        version=version,
        policy_id=policy_id,
        starter=starter,
        files=files,
        counts=count_cases(cases),
    )


def manifest_text(manifest: CorpusManifest) -> str:
    """Serialize a manifest the way it is written (stable, no timestamps, so it is reproducible)."""
    # `exclude_none` leaves an absent `policy_id` out: manifests written before the field stay
    # byte-identical.
    document = manifest.model_dump(mode="json", exclude_none=True)
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def compare_manifest(
    manifest: CorpusManifest,
    files: dict[str, str],
    cases: Sequence[AuthoredCase] | None,
) -> list[Problem]:
    """Problems of the files on disk (`files`: path -> sha256) and counts against a manifest.

    Args:
        manifest: The manifest as read.
        files: Every corpus file as read now (see `CorpusSnapshot.file_hashes`).
        cases: The parsed cases, or None when some case failed to parse (then counts would only
            repeat that failure and are not compared).
    """
    problems = []
    for rel, digest in files.items():
        listed = manifest.files.get(rel)
        pointer = json_pointer(["files", rel])
        if listed is None:
            problems.append(
                Problem(
                    file=rel, message=f"not listed in {MANIFEST_NAME} (added after it was written?)"
                )
            )
        elif listed != digest:
            problems.append(
                Problem(
                    file=rel,
                    message=f"sha256 {digest[:16]}... differs from {MANIFEST_NAME} {pointer} "
                    f"({listed[:16]}...): the file changed after the manifest was written",
                )
            )
    for rel in manifest.files:
        if rel not in files:
            problems.append(
                Problem(
                    file=MANIFEST_NAME,
                    pointer=json_pointer(["files", rel]),
                    message=f"lists {rel}, which does not exist",
                )
            )
    if cases is not None:
        actual = count_cases(cases)
        for field in ("cases", "by_decision", "by_group", "by_variant"):
            if getattr(actual, field) != getattr(manifest.counts, field):
                problems.append(
                    Problem(
                        file=MANIFEST_NAME,
                        pointer=json_pointer(["counts", field]),
                        message=f"{getattr(manifest.counts, field)} does not match the cases "
                        f"present: {getattr(actual, field)}",
                    )
                )
    return problems
