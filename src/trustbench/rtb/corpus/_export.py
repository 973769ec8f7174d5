"""Prepare candidate inputs: what a reviewer sees, apart from what only the grader sees.

An export writes, under its output folder:

- `inputs/<evaluation_id>.json`: one `CandidateInput` per case (task, proposal, evidence and a
  fresh evaluation id; no case id, variant or answer key);
- `review_prompt.md` and `reviewer_response.schema.json`: the shared prompt and response format;
- `grader/evaluation_map.json`: evaluation id -> case id, for the grader only. Keep `grader/` away
  from candidates (a candidate that can read it can look up every answer).

Every input is checked before anything is written: it must match the candidate-input schema and
the model, and a leak scan against the grader-only values of *every* case in the corpus must find
nothing. Evaluation ids come from the OS's CSPRNG (128 bits) unless a seed is given for a
reproducible export; seeded ids are predictable to anyone who knows the seed.

The inputs are written in a shuffled order (seeded with the export's seed, else from the CSPRNG)
and all get one fixed modification time, `INPUT_MTIME`: neither the files' times nor the order
in which the file system allocated them can reproduce the corpus's case order.
"""

from __future__ import annotations

import json
import os
import random
import secrets
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from trustbench._canonical import read_input_file
from trustbench._docstrings import documented
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.corpus._leakscan import find_leaks, grader_only_values
from trustbench.rtb.corpus._load import Corpus, build_schema, schema_problems, schema_text
from trustbench.rtb.policy._protocol import AuthoredCase
from trustbench.rtb.policy._registry import policy_for, policy_of

INPUT_MTIME = 946_684_800
"""Modification and access time of every exported input (2000-01-01T00:00:00Z), one for all."""

EVALUATION_MAP_PATH = "grader/evaluation_map.json"
"""Where an export keeps the grader-side map, relative to its output folder."""


class EvaluationMap(BaseModel):
    """The grader-side record of one export (`grader/evaluation_map.json`)."""

    model_config = documented(extra="forbid")

    corpus_version: str
    """Version of the exported corpus."""
    corpus_manifest_sha256: str
    """SHA-256 of the corpus's `MANIFEST.json`: pins exactly which files were exported."""
    seed: int | None
    """Seed of a reproducible export; None when ids came from `secrets` (unpredictable)."""
    evaluations: dict[str, str]
    """Evaluation id -> case id, sorted by evaluation id (so the order reveals nothing)."""


class ExportResult(BaseModel):
    """Where an export wrote its files, and the map the grader needs."""

    model_config = documented(frozen=True)

    out_dir: Path
    """The export's output folder."""
    inputs_dir: Path
    """Folder of candidate inputs, one `<evaluation_id>.json` per case."""
    prompt_path: Path
    """The shared review prompt, copied for candidates."""
    response_schema_path: Path
    """The reviewer-response schema, copied for candidates."""
    grader_map_path: Path
    """The grader-only evaluation map; never give it to a candidate."""
    evaluation_map: EvaluationMap
    """The map's content (evaluation id -> case id and provenance)."""


def new_evaluation_id(rng: random.Random | None = None) -> str:
    """Issue an evaluation id: 128 random bits, hex-encoded, prefixed `rtb-`.

    Args:
        rng: Source for a reproducible id; None (the default) uses the OS's CSPRNG
            (`secrets`), which a candidate cannot predict.
    """
    bits = rng.getrandbits(128) if rng is not None else secrets.randbits(128)
    return f"rtb-{bits:032x}"


def to_candidate_input(case: AuthoredCase, evaluation_id: str) -> Any:
    """The candidate-visible part of a case under a fresh id, as the case's policy exports it.

    Task, proposal and evidence (and whatever else the policy shows, e.g. an evaluation time),
    never the answer key: the policy's candidate model cannot hold it.
    """
    return policy_of(case).candidate_input(case, evaluation_id)


def candidate_input_problems(
    candidate: BaseModel, case: AuthoredCase, forbidden: set[str]
) -> list[str]:
    """Why a prepared input must not be shown to a candidate (empty list: it may be shown)."""
    document = candidate.model_dump(mode="json")
    policy = policy_of(case).policy_id
    problems = [
        str(p)
        for p in schema_problems(case.case_id, document, "candidate_input.schema.json", policy)
    ]
    problems += [f"{case.case_id}: leak at {leak}" for leak in find_leaks(document, forbidden)]
    return problems


def export_candidate_inputs(corpus: Corpus, out_dir: Path, seed: int | None = None) -> ExportResult:
    """Write one candidate input per case and, apart, the grader-side evaluation map.

    Args:
        corpus: A loaded (hence validated) corpus.
        out_dir: Output folder; its `inputs/` and `grader/` must not already hold files.
        seed: Seed for reproducible evaluation ids; None for unpredictable ones.

    Returns:
        The paths written and the evaluation map.

    Raises:
        InputError: The output folder already holds an export.
        CheckFailed: An input fails the candidate schema or leaks a grader-only value; nothing
            is written.
    """
    out_dir = Path(out_dir)
    for sub in ("inputs", "grader"):
        if (out_dir / sub).exists() and any((out_dir / sub).iterdir()):
            raise InputError(f"{out_dir / sub} already holds files; export into a new folder")
    rng = random.Random(seed) if seed is not None else None
    forbidden = set().union(*(grader_only_values(case) for case in corpus.cases))
    prepared: dict[str, BaseModel] = {}
    evaluations: dict[str, str] = {}
    problems: list[str] = []
    for case in corpus.cases:
        evaluation_id = new_evaluation_id(rng)
        while evaluation_id in prepared:  # 128-bit collision: practically never, still handled
            evaluation_id = new_evaluation_id(rng)
        candidate = to_candidate_input(case, evaluation_id)
        problems += candidate_input_problems(candidate, case, forbidden)
        prepared[evaluation_id] = candidate
        evaluations[evaluation_id] = case.case_id
    # The prompt is shared by every case and legitimately lists the reason-code vocabulary; it
    # must still name no case, variant, decisive condition or authoring note.
    vocabulary = set(policy_for(corpus.policy_id).reason_codes)
    problems += [
        f"review prompt: leak at {leak}"
        for leak in find_leaks(corpus.review_prompt, forbidden - vocabulary)
    ]
    if problems:
        shown = "\n  ".join(problems[:10])
        raise CheckFailed(
            f"refusing to export: {len(problems)} problem(s), nothing written:\n  {shown}"
        )

    inputs_dir = out_dir / "inputs"
    inputs_dir.mkdir(parents=True, exist_ok=True)
    order = list(prepared.items())
    (rng or random.SystemRandom()).shuffle(order)
    for evaluation_id, candidate in order:
        text = json.dumps(candidate.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        path = inputs_dir / f"{evaluation_id}.json"
        path.write_text(text, encoding="utf-8")
        os.utime(path, (INPUT_MTIME, INPUT_MTIME))
    prompt_path = out_dir / "review_prompt.md"
    prompt_path.write_text(corpus.review_prompt, encoding="utf-8")
    response_schema_path = out_dir / "reviewer_response.schema.json"
    response_schema_path.write_text(
        schema_text(build_schema("reviewer_response.schema.json", corpus.policy_id)),
        encoding="utf-8",
    )
    evaluation_map = EvaluationMap(
        corpus_version=corpus.version,
        corpus_manifest_sha256=corpus.manifest_sha256,
        seed=seed,
        evaluations=dict(sorted(evaluations.items())),
    )
    grader_map_path = out_dir / EVALUATION_MAP_PATH
    grader_map_path.parent.mkdir(parents=True, exist_ok=True)
    grader_map_path.write_text(
        json.dumps(evaluation_map.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8"
    )
    return ExportResult(
        out_dir=out_dir,
        inputs_dir=inputs_dir,
        prompt_path=prompt_path,
        response_schema_path=response_schema_path,
        grader_map_path=grader_map_path,
        evaluation_map=evaluation_map,
    )


def load_evaluation_map(path: Path) -> EvaluationMap:
    """Read an export's `grader/evaluation_map.json`.

    Raises:
        InputError: The file is missing, not a regular file, or does not match the
            `EvaluationMap` format.
    """
    raw = read_input_file(Path(path))  # missing, a FIFO or a device: refused, naming it
    try:
        return EvaluationMap.model_validate_json(raw)
    except ValueError as error:
        raise InputError(f"{path}: not a valid evaluation map: {error}") from None
