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
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from trustbench._unpredictable import random_bits
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.corpus._formats import FORMATS, POLICY_ID_V1
from trustbench.rtb.corpus._jsondoc import schema_problems
from trustbench.rtb.corpus._leakscan import find_leaks, grader_only_values
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.corpus._models import CandidateInput, Case
from trustbench.rtb.corpus._schemas import build_schema, schema_text
from trustbench.rtb.policy.narrow_v2._models import POLICY_ID_V2, CandidateInputV2, CaseV2

EVALUATION_MAP_PATH = "grader/evaluation_map.json"
"""Where an export keeps the grader-side map, relative to its output folder."""


class EvaluationMap(BaseModel):
    """The grader-side record of one export (`grader/evaluation_map.json`)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

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

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

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
        rng: Source for a reproducible id; None (the default) uses the OS's CSPRNG (as `secrets`
            does; see `trustbench._unpredictable`), which a candidate cannot predict.
    """
    bits = rng.getrandbits(128) if rng is not None else random_bits(128)
    return f"rtb-{bits:032x}"


def to_candidate_input(case: Case | CaseV2, evaluation_id: str) -> CandidateInput:
    """The candidate-visible part of a case: task, proposal and evidence under a fresh id.

    A v0.2 case gives a `CandidateInputV2` (it also carries `as_of`); the return annotation
    names the v0.1 type that most callers handle.
    """
    if isinstance(case, CaseV2):
        return CandidateInputV2(  # type: ignore[return-value]
            evaluation_id=evaluation_id,
            task=case.task,
            as_of=case.as_of,
            proposal=case.proposal,
            evidence=list(case.evidence),
        )
    return CandidateInput(
        evaluation_id=evaluation_id,
        task=case.task,
        proposal=case.proposal,
        evidence=list(case.evidence),
    )


def candidate_input_problems(
    candidate: CandidateInput | CandidateInputV2, case: Case | CaseV2, forbidden: set[str]
) -> list[str]:
    """Why a prepared input must not be shown to a candidate (empty list: it may be shown)."""
    document = candidate.model_dump(mode="json")
    policy = None if isinstance(case, Case) else POLICY_ID_V2
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
    prepared: dict[str, CandidateInput | CandidateInputV2] = {}
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
    vocabulary = set(FORMATS[corpus.policy_id].reason_codes)
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
    for evaluation_id, candidate in prepared.items():
        text = json.dumps(candidate.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        (inputs_dir / f"{evaluation_id}.json").write_text(text, encoding="utf-8")
    prompt_path = out_dir / "review_prompt.md"
    prompt_path.write_text(corpus.review_prompt, encoding="utf-8")
    response_schema_path = out_dir / "reviewer_response.schema.json"
    response_schema_path.write_text(
        schema_text(
            build_schema(
                "reviewer_response.schema.json",
                None if corpus.policy_id == POLICY_ID_V1 else corpus.policy_id,
            )
        ),
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
        InputError: The file is missing or does not match the `EvaluationMap` format.
    """
    try:
        return EvaluationMap.model_validate_json(Path(path).read_bytes())
    except FileNotFoundError:
        raise InputError(f"{path}: evaluation map not found") from None
    except ValueError as error:
        raise InputError(f"{path}: not a valid evaluation map: {error}") from None
