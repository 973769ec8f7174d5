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
default: the built-in corpus the export was made from), `grader_map` (default:
`<export_dir>/grader/evaluation_map.json`).
Inspect imports this file from inside its own folder, so a relative argument is resolved here
from the folder the command was typed in (`$PWD`, which that change of folder leaves alone); a
path that names nothing fails in one line that names the path tried.
"""

from __future__ import annotations

import os
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate

from trustbench.errors import CheckFailed, InputError
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


def typed_path(value: str) -> Path:
    """A task argument as the user meant it: relative to where the command was typed.

    `$PWD` is that folder when it names the same place the process started in; Inspect's own
    change of folder (to this file's) happens later, inside the process, and does not touch it.
    """
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    typed_in = os.environ.get("PWD")
    base = Path(typed_in) if typed_in and Path(typed_in).is_dir() else Path.cwd()
    return (base / path).resolve()


def _existing(value: str, argument: str, *, folder: bool) -> Path:
    path = typed_path(value)
    if not (path.is_dir() if folder else path.is_file()):
        kind = "folder" if folder else "file"
        raise InputError(f"-T {argument}: no such {kind} (tried {path})")
    return path


@task
def rtb_review(export_dir: str, corpus: str | None = None, grader_map: str | None = None) -> Task:
    """The RTB reviewer track over an `rtb export` folder (see the module docstring).

    Raises:
        PrerequisiteError: Inspect's error for a problem the user must fix, which its command
            line prints as the message alone (one line naming the path tried), not a traceback.
    """
    try:
        export = _existing(export_dir, "export_dir", folder=True)
        review = load_exported_review(
            export,
            corpus=_existing(corpus, "corpus", folder=True) if corpus else None,
            grader_map=_existing(grader_map, "grader_map", folder=False) if grader_map else None,
        )
    except (InputError, CheckFailed) as error:
        try:
            from inspect_ai._util.error import PrerequisiteError
        except ImportError:  # another Inspect release: the plain error, with its traceback
            raise error from None
        raise PrerequisiteError(f"rtb_review: {error}") from None
    return Task(
        dataset=MemoryDataset(review_samples(review), name=f"rtb-{review.corpus.version}"),
        solver=generate(),
        scorer=rtb_review_scorer(review),
        metadata={"trustbench_export": str(export)},
    )
