"""Outside attackers of RTB corpus v0.4 (issue 51, "Checked by"), kept apart from the project.

The attackers (`tests/support/outside_corpus.py`) read only what a candidate sees and the policy
text; they share no code with the generator or the audit. Each is graded by the project's grader
and judged by the v0.4 review spec's release gates, as the reviewer track does for one trial per
case. The corpus is read at run time: no per-case figure is pinned. Figures and the domain
review: `docs/rtb-corpus-v0.4-review.md`.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.support.outside_corpus import (
    CARELESS_READERS,
    FABRICATIONS,
    LEARNERS,
    GateOutcome,
    Seen,
    best_relabelled_accuracy,
    fabricated_reply,
    gate_outcome,
    graded_row,
    learner_replies,
    pool_cases,
    reader_replies,
    reference_reply,
    shipped_cases,
    utc_reply,
)

from trustbench.rtb.policy.narrow_v4 import CaseV4

POOL_SIZE = 180
"""Pool cases the learners are fitted on (30 families): seconds, not the audit's minutes."""
POOL_SEED = 1
"""A seed the shipped corpus did not use (`pool_cases` checks it against `corpus_seeds`)."""
FAST_LEARNERS = ("forest-tokens", "knn-text", "forest-relations")
"""The learners run here (a second or few each); `boosted-tokens` and `char-ngram-logistic`
(tens of CPU seconds) run for the review document's figures on a 1,440-case pool."""


@pytest.fixture(scope="module")
def cases() -> list[CaseV4]:
    return shipped_cases()


@pytest.fixture(scope="module")
def pool() -> list[CaseV4]:
    return pool_cases(POOL_SIZE, POOL_SEED)


def test_best_relabelling_reads_a_reader_that_swaps_names_as_accurate() -> None:
    truth = ["permit", "deny", "hold", "permit"]
    swapped = ["deny", "hold", "permit", "deny"]
    assert best_relabelled_accuracy(truth, swapped) == 1.0
    assert best_relabelled_accuracy(truth, ["hold"] * 4) == 0.5


def test_reference_reviewer_passes_every_gate_so_a_failing_attacker_means_something(
    cases: list[CaseV4],
) -> None:
    # The grading and gate path the attackers go through can pass: the policy's own finding
    # passes all five release gates with every finding supported.
    outcome = gate_outcome(cases, [reference_reply(case) for case in cases])
    assert outcome.passes, outcome.summary()
    assert outcome.supported == outcome.cases == len(cases)


@pytest.mark.parametrize("name", sorted(CARELESS_READERS))
def test_no_careless_reader_passes_the_v0_4_release_gates(name: str, cases: list[CaseV4]) -> None:
    reader: Callable[[Seen], str] = CARELESS_READERS[name]
    outcome = gate_outcome(cases, reader_replies(cases, reader))
    assert not outcome.passes, outcome.summary()
    # Not by form alone: each reader fails a decision gate, not only the finding gate.
    assert _failed_decision_gates(outcome), outcome.summary()


@pytest.mark.parametrize("name", FAST_LEARNERS)
def test_no_pool_trained_learner_passes_the_v0_4_release_gates(
    name: str, cases: list[CaseV4], pool: list[CaseV4]
) -> None:
    outcome = gate_outcome(cases, learner_replies(LEARNERS[name], pool, cases))
    assert not outcome.passes, outcome.summary()
    assert _failed_decision_gates(outcome), outcome.summary()


def _failed_decision_gates(outcome: GateOutcome) -> list[str]:
    return [
        gate.spec.name or ""
        for gate in outcome.gates
        if gate.status == "failed" and gate.spec.metric != "supported_finding_rate"
    ]


def test_fabricating_reviewer_fails_the_supported_findings_gate(cases: list[CaseV4]) -> None:
    # The answer key's decision, the reference's codes and citations, plus one lookalike false
    # discrepancy wherever one can be made: the decision gates pass, the finding gate must not.
    fabricated = [fabricated_reply(case) for case in cases]
    assert sum(kind is not None for _, kind in fabricated) > len(cases) // 2
    outcome = gate_outcome(cases, [reply for reply, _ in fabricated])
    assert outcome.accuracy == 1.0
    assert outcome.gate("supported-findings").status == "failed", outcome.summary()


@pytest.mark.parametrize("kind", sorted(FABRICATIONS))
def test_each_lookalike_fabrication_is_never_supported(kind: str, cases: list[CaseV4]) -> None:
    made = [(case, fabricated_reply(case, [kind])) for case in cases]
    fabricated = [(case, reply) for case, (reply, added) in made if added == kind]
    assert fabricated, f"no case admits the {kind} fabrication"
    supported = [case.case_id for case, reply in fabricated if graded_row(case, reply).supported]
    assert supported == [], f"{kind} passed as a true discrepancy on {supported}"


def test_utc_writing_honest_reviewer_passes_the_supported_findings_gate(
    cases: list[CaseV4],
) -> None:
    restated = [utc_reply(case) for case in cases]
    assert sum(changed for _, changed in restated) > 0  # some finding cites a time
    outcome = gate_outcome(cases, [reply for reply, _ in restated])
    assert outcome.gate("supported-findings").status == "passed", outcome.summary()
    assert outcome.supported == len(cases)


def test_reviewer_fabricating_sibling_approval_status_fails_the_supported_findings_gate(
    cases: list[CaseV4],
) -> None:
    fabricated = [fabricated_reply(case, ["sibling-approval-status"]) for case in cases]
    outcome = gate_outcome(cases, [reply for reply, _ in fabricated])
    assert outcome.gate("supported-findings").status == "failed", outcome.summary()
