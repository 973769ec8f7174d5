"""The RTB reviewer track as an Inspect AI task: `inspect eval .../inspect_task.py@rtb_review`.

Dataset: the candidate inputs of an `rtb export` folder (`inputs/<evaluation_id>.json`), one
sample per case, id = evaluation id, sent as the same two messages trustbench sends (the shared
review prompt as the system message, the input as JSON as the user message; see
`build_review_messages`). The dataset holds no answer key: `target` is empty and the metadata
holds only the evaluation id.

Scorer: trustbench's own `validate_response` turns the reply into permit / deny / hold / missing
/ invalid (missing and invalid are never approval), and the grader side reads the export's
`grader/evaluation_map.json` and the corpus (whose hash must match the map) to judge whether the
finding is supported. The Inspect score is `C` only for a supported finding; Inspect's accuracy
counts a missing reply as 0, so read the figures of record from `trustbench import-inspect` and
`trustbench report` (which grade the log again from the replies, with intervals).

Task arguments (`-T name=value`): `export_dir` (required), `corpus` (the exported corpus folder;
default: the built-in one), `grader_map` (default: `<export_dir>/grader/evaluation_map.json`).
"""

from __future__ import annotations

from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate

from trustbench.interop._inspect import chat_messages
from trustbench.interop._rtb_export import ExportedReview, load_exported_review


def review_samples(review: ExportedReview) -> list[Sample]:
    """One sample per exported input, carrying only candidate-visible content."""
    return [
        Sample(
            id=evaluation_id,
            input=chat_messages(review.messages(evaluation_id)),
            target="",
            metadata={"evaluation_id": evaluation_id},
        )
        for evaluation_id in sorted(review.inputs)
    ]


@scorer(metrics=[accuracy()])
def rtb_review_scorer(review: ExportedReview) -> Scorer:
    """Score a reply with trustbench's validation and, grader side, its support judgment.

    Args:
        review: The loaded export with its grader-side map and corpus.
    """

    async def score(state: TaskState, target: Target) -> Score:
        evaluation_id = str(state.sample_id)
        graded = review.grade(evaluation_id, state.output.completion)
        return Score(
            value=CORRECT if graded["supported"] else INCORRECT,
            answer=graded["outcome"],
            explanation=graded["explanation"],
            metadata=graded,
        )

    return score


@task
def rtb_review(export_dir: str, corpus: str | None = None, grader_map: str | None = None) -> Task:
    """The RTB reviewer track over an `rtb export` folder (see the module docstring)."""
    review = load_exported_review(
        Path(export_dir),
        corpus=Path(corpus) if corpus else None,
        grader_map=Path(grader_map) if grader_map else None,
    )
    return Task(
        dataset=MemoryDataset(review_samples(review), name=f"rtb-{review.corpus.version}"),
        solver=generate(),
        scorer=rtb_review_scorer(review),
        metadata={"trustbench_export": str(Path(export_dir).resolve())},
    )
