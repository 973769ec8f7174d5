"""An `rtb export` folder read back: candidate inputs apart from the grader-side map and corpus.

Used by the Inspect task (to build samples and score replies) and by `import-inspect` (to map each
sample back to its case and to check that the model was sent exactly the exported input).

Every corpus version trustbench ships is read: the corpus is loaded first, and the inputs are
validated with the candidate-input model of the policy its manifest declares
(`candidate_input_model`, from its `CorpusPolicy` object), so a v0.2 input is read as a v0.2
input, never forced into v0.1's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel

from trustbench._canonical import read_input_file
from trustbench.errors import CheckFailed, InputError

if TYPE_CHECKING:
    from trustbench.rtb.corpus import Corpus, EvaluationMap


@dataclass(frozen=True)
class ExportedReview:
    """One export: what candidates see (`inputs`, `prompt`) and what only the grader reads."""

    inputs: dict[str, Any]
    """Evaluation id -> the candidate input exported under it (the corpus policy's model)."""
    prompt: str
    """The shared review prompt as exported (`review_prompt.md`)."""
    evaluation_map: EvaluationMap
    """Grader side: evaluation id -> case id, with the corpus hash it was exported from."""
    corpus: Corpus
    """Grader side: the corpus (answer key included) whose hash the map names."""
    corpus_root: Path
    """Folder of that corpus."""

    def messages(self, evaluation_id: str) -> list[dict[str, str]]:
        """The two messages a reviewer is sent for this input (as `trustbench run` sends them)."""
        from trustbench.rtb.review.reviewers._llm import build_review_messages

        return build_review_messages(self.prompt, self.inputs[evaluation_id])

    def grade(self, evaluation_id: str, reply: str | None) -> dict[str, Any]:
        """Validate a reply and judge its support for the mapped case (grader side)."""
        from trustbench.rtb.review._validation import support_gaps, validate_response

        validated = validate_response(reply, self.inputs[evaluation_id])
        case = self.corpus.case(self.evaluation_map.evaluations[evaluation_id])
        gaps = support_gaps(validated, case)
        return {
            "outcome": validated.outcome.value,
            "supported": not gaps,
            "invalid_reason": validated.invalid_reason,
            "explanation": "supported" if not gaps else "; ".join(gaps),
        }


def builtin_for(manifest_sha256: str) -> Path:
    """The built-in corpus whose `MANIFEST.json` has this SHA-256: the one an export was made from.

    An export made with `trustbench rtb export` (default corpus) or `--corpus` naming a shipped
    corpus folder needs no `--corpus` / `-T corpus`. When no shipped corpus matches, the
    reviewer-side default is returned and the caller's hash check names the mismatch.
    """
    from trustbench._canonical import file_sha256
    from trustbench.rtb.corpus._load import BUILTIN_VERSIONS, DEFAULT_VERSION, builtin_corpus_root

    for version in (DEFAULT_VERSION, *BUILTIN_VERSIONS):
        root = builtin_corpus_root(version)
        if file_sha256(root / "MANIFEST.json") == manifest_sha256:
            return root
    return builtin_corpus_root(DEFAULT_VERSION)


def candidate_input_model(policy_id: str) -> type[BaseModel]:
    """The candidate-input model of a corpus policy (its `CorpusPolicy` object's).

    Raises:
        InputError: trustbench implements no such policy.
    """
    from trustbench.rtb.policy import policy_for

    return policy_for(policy_id).candidate_model


def load_exported_review(
    export_dir: Path, *, corpus: Path | None = None, grader_map: Path | None = None
) -> ExportedReview:
    """Read an export folder, its grader map and the corpus it was exported from.

    Args:
        export_dir: Folder written by `trustbench rtb export`.
        corpus: The exported corpus folder (default: the built-in corpus the map was made
            from, see `builtin_for`).
        grader_map: The grader-only map (default: `<export_dir>/grader/evaluation_map.json`).

    Raises:
        InputError: a file is missing or malformed.
        CheckFailed: the corpus is not the one the map was exported from, or an input does not
            match its case (the export was edited).
    """
    # The RTB corpus and policies load when an export is read, not when the CLI starts.
    from trustbench.rtb.corpus import load_corpus, load_evaluation_map, to_candidate_input
    from trustbench.rtb.corpus._export import EVALUATION_MAP_PATH
    from trustbench.rtb.policy import CandidateInput

    inputs_dir = export_dir / "inputs"
    if not inputs_dir.is_dir():
        raise InputError("no inputs/ folder: not an `rtb export` folder", location=str(export_dir))
    evaluation_map = load_evaluation_map(grader_map or export_dir / EVALUATION_MAP_PATH)
    root = (corpus or builtin_for(evaluation_map.corpus_manifest_sha256)).resolve()
    loaded = load_corpus(root)
    if loaded.manifest_sha256 != evaluation_map.corpus_manifest_sha256:
        raise CheckFailed(
            f"the corpus at {root} is not the one this export was made from (MANIFEST.json "
            f"sha256 {loaded.manifest_sha256[:12]}…, the map names "
            f"{evaluation_map.corpus_manifest_sha256[:12]}…); pass --corpus / -T corpus=...",
            location=str(export_dir),
        )
    model = candidate_input_model(loaded.policy_id)
    inputs: dict[str, Any] = {}
    for path in sorted(inputs_dir.glob("*.json")):
        try:
            # An instance of the policy's candidate model (`CandidateInput` names what we read).
            candidate = cast(CandidateInput, model.model_validate_json(read_input_file(path)))
        except ValueError as error:
            raise InputError(
                f"not a candidate input of policy {loaded.policy_id}: {error}", location=str(path)
            ) from None
        if candidate.evaluation_id != path.stem:
            raise CheckFailed("evaluation_id differs from the file name", location=str(path))
        inputs[candidate.evaluation_id] = candidate
    prompt_path = export_dir / "review_prompt.md"
    raw_prompt = read_input_file(prompt_path, missing="review_prompt.md not found")
    try:
        prompt = raw_prompt.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("review_prompt.md is not UTF-8 text", location=str(prompt_path)) from None
    if set(inputs) != set(evaluation_map.evaluations):
        raise CheckFailed(
            "inputs/ and the grader map list different evaluation ids", location=str(export_dir)
        )
    for evaluation_id, candidate in inputs.items():
        case = loaded.case(evaluation_map.evaluations[evaluation_id])
        if candidate != to_candidate_input(case, evaluation_id):
            raise CheckFailed(
                f"input {evaluation_id} differs from its case {case.case_id} (edited export?)",
                location=str(inputs_dir / f"{evaluation_id}.json"),
            )
    if prompt != loaded.review_prompt:
        raise CheckFailed(
            "review_prompt.md differs from the corpus prompt", location=str(prompt_path)
        )
    return ExportedReview(inputs, prompt, evaluation_map, loaded, root)
