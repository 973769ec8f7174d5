"""The peer workload as an Inspect AI task: the same reviewer trials, the same validation.

Each sample is one trial of the bench workload (same case, a fresh evaluation id as the track
issues, same messages, in the same seeded order as `trustbench run`); the solver is one
`generate()`; the scorer validates the reply with `validate_response`, as the reviewer track's
grading does. Task arguments: `cases`, `trials_per_case`. Run by `bench/peer_inspect.py`.
"""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.scorer import Score, Scorer, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate

from bench._workload import corpus, review_messages
from trustbench.core import TrialKey, trial_order
from trustbench.rtb.corpus import CandidateInput
from trustbench.rtb.review._validation import validate_response


@scorer(metrics=[accuracy()])
def reviewer_reply_is_valid() -> Scorer:
    async def score(state: TaskState, target: Target) -> Score:
        candidate_input = CandidateInput.model_validate(state.metadata["candidate_input"])
        validated = validate_response(state.output.completion, candidate_input)
        return Score(value=1 if validated.outcome.is_decision else 0, answer=validated.outcome)

    return score


@task
def bench_review(cases: int = 50, trials_per_case: int = 40) -> Task:
    keys = [
        TrialKey(case.case_id, "reviewer", index)
        for case in corpus().cases[:cases]
        for index in range(trials_per_case)
    ]
    position = {case.case_id: i for i, case in enumerate(corpus().cases)}
    samples = []
    for key in trial_order(keys, 7):
        messages, candidate_input = review_messages(position[key.case_id])
        samples.append(
            Sample(
                id=key.trial_id,
                input=[
                    ChatMessageSystem(content=messages[0]["content"]),
                    ChatMessageUser(content=messages[1]["content"]),
                ],
                metadata={"candidate_input": candidate_input.model_dump(mode="json")},
            )
        )
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=reviewer_reply_is_valid())
