"""Review configurations: chain aggregation, unchecked baseline, identity labels.

Configuration trials are graded as the track grades them: each member's reply through the
track's member grading, the row through `configuration_row`, the one row builder.
"""

from __future__ import annotations

import dataclasses
import itertools
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from test_reviewers_fixtures import PROMPT, export, make_cases

from trustbench.rtb.corpus import Decision
from trustbench.rtb.corpus._export import to_candidate_input
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.corpus._models import Case
from trustbench.rtb.review import Outcome, ReviewTrialRow
from trustbench.rtb.review._chain import (
    ConfigurationKind,
    MemberIdentity,
    ProviderRelation,
    ReviewConfiguration,
    aggregate_chain,
    chain_supported,
)
from trustbench.rtb.review._counting import review_metrics
from trustbench.rtb.review._grading import (
    ConfigurationRow,
    MemberTrial,
    ReplyGrader,
    _member_trial,
    configuration_row,
    configuration_rows,
    record_row,
)
from trustbench.rtb.review.reviewers import make_reviewer

P, D, H, M, X = Outcome.PERMIT, Outcome.DENY, Outcome.HOLD, Outcome.MISSING, Outcome.INVALID
CASES = make_cases()


def _chain(*names: str) -> ReviewConfiguration:
    return ReviewConfiguration(
        name="+".join(names),
        kind=ConfigurationKind.CHAIN,
        members=tuple(MemberIdentity(reviewer=n) for n in names),
    )


def _graded(reviewer: str, case: Case, k: int = 0) -> MemberTrial:
    """One reviewer's trial of `case`, recorded as the ledger holds it and graded by the track."""
    evaluation_id = export(case).evaluation_id
    reply = make_reviewer(reviewer).review(PROMPT, to_candidate_input(case, evaluation_id))
    trial = {
        "candidate": reviewer, "trial_index": k, "status": "completed", "error_class": None,
        "outcome": {"evaluation_id": evaluation_id, "reply": reply, "reported_model": None},
    }  # fmt: skip
    attempts = [{"latency_s": 0.25, "prompt_tokens": 10, "completion_tokens": 5, "cost_usd": 0.5}]
    return _member_trial(case, trial, attempts, "strict", ReplyGrader(to_candidate_input))


def _rows(config: ReviewConfiguration, names: list[str]) -> list[ReviewTrialRow]:
    """Every row of `config` over the fixture cases, assembled and built as the track does."""
    graded = {
        (case.case_id, name, 0): _graded(name, case)
        for case in CASES
        for name in dict.fromkeys(names)
    }
    corpus = cast(Corpus, SimpleNamespace(cases=CASES))  # the rows read only its cases
    rows, not_run = configuration_rows(config, names, corpus, 1, graded)
    assert not_run == []
    return [item.row for item in rows]


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (P, P, P),
        (P, D, D),
        (D, P, D),
        (D, X, D),
        (M, D, D),
        (P, H, H),
        (H, H, H),
        (P, X, X),
        (H, X, X),
        (M, X, X),
        (P, M, M),
        (M, H, M),
        (M, M, M),
    ],
)
def test_chain_rule_permit_only_if_both_then_deny_then_invalid_missing_then_hold(
    first: Outcome, second: Outcome, expected: Outcome
) -> None:
    assert aggregate_chain([first, second]) is expected


@pytest.mark.parametrize("outcome", list(Outcome))
def test_a_single_member_configuration_reports_its_members_outcome(outcome: Outcome) -> None:
    assert aggregate_chain([outcome]) is outcome


def test_chain_rule_is_symmetric_for_two_members() -> None:
    for first, second in itertools.product(Outcome, repeat=2):
        assert aggregate_chain([first, second]) is aggregate_chain([second, first])


@given(st.lists(st.sampled_from(list(Outcome)), min_size=1, max_size=4))
def test_chain_approves_only_when_every_member_permits(outcomes: list[Outcome]) -> None:
    assert (aggregate_chain(outcomes) is P) == all(o is P for o in outcomes)
    if M in outcomes or X in outcomes:
        assert aggregate_chain(outcomes) is not P


def test_chain_of_reference_policy_and_always_permit_keeps_joint_member_outcomes() -> None:
    rows = _rows(_chain("reference-policy", "always-permit"), ["reference-policy", "always-permit"])
    for case, row in zip(CASES, rows, strict=True):
        reference = Outcome(case.expectations.reference_decision.value)
        assert row.member_outcomes == (reference, P)
        assert row.observed is reference


def test_chain_with_an_empty_member_is_never_approval_and_shows_missing() -> None:
    rows = _rows(_chain("always-permit", "empty"), ["always-permit", "empty"])
    assert {row.observed for row in rows} == {M}
    assert {row.member_outcomes for row in rows} == {(P, M)}


def test_unchecked_baseline_lets_every_proposal_proceed_without_reviewers() -> None:
    rows = _rows(ReviewConfiguration(name="unchecked", kind=ConfigurationKind.UNCHECKED), [])
    assert len(rows) == len(CASES)
    assert all(row.observed is P and row.member_outcomes == () for row in rows)


@pytest.mark.parametrize(
    ("kind", "members"),
    [(ConfigurationKind.UNCHECKED, 1), (ConfigurationKind.SINGLE, 2), (ConfigurationKind.CHAIN, 1)],
)
def test_configuration_member_count_must_match_its_kind(kind, members) -> None:
    with pytest.raises(ValidationError, match="cannot have"):
        ReviewConfiguration(
            name="x", kind=kind, members=tuple(MemberIdentity(reviewer="r") for _ in range(members))
        )


@pytest.mark.parametrize(
    ("identities", "relation"),
    [
        ([("p1", "m1"), ("p1", "m1")], ProviderRelation.SAME_MODEL),
        ([("p1", "m1"), ("p1", "m2")], ProviderRelation.SAME_PROVIDER),
        ([("p1", "m1"), ("p2", "m1")], ProviderRelation.CROSS_PROVIDER),
        ([("p1", "m1"), (None, None)], ProviderRelation.UNKNOWN),
    ],
)
def test_provider_relation_is_a_label_from_recorded_identities(identities, relation) -> None:
    members = tuple(
        MemberIdentity(reviewer=f"r{i}", provider=p, model=m) for i, (p, m) in enumerate(identities)
    )
    config = ReviewConfiguration(name="c", kind=ConfigurationKind.CHAIN, members=members)
    assert config.provider_relation is relation
    single = ReviewConfiguration(name="s", kind=ConfigurationKind.SINGLE, members=members[:1])
    assert single.provider_relation is ProviderRelation.NOT_APPLICABLE


def test_chain_finding_is_supported_only_through_a_member_that_reached_its_decision() -> None:
    assert chain_supported([D, P], [True, False])
    assert not chain_supported([D, P], [False, True])
    assert chain_supported([P, P], [False, True])
    assert not chain_supported([P, M], [True, False])


def test_graded_chain_rows_feed_chain_metrics_with_joint_decisions() -> None:
    rows = _rows(_chain("always-permit", "reference-policy"), ["always-permit", "reference-policy"])
    assert all(len(r.member_outcomes) == 2 for r in rows)
    assert all(r.supported for r in rows)  # the reference policy carries every chain decision
    metrics = review_metrics(rows)
    assert metrics.chain is not None
    deny = metrics.chain[Decision.DENY]
    assert (deny.first_approves.numerator, deny.first_approves.denominator) == (6, 6)
    assert deny.second_approves_given_first_approves.numerator == 0
    assert metrics.overall.false_approval.numerator == 0


def test_graded_unchecked_rows_approve_everything_and_have_no_finding_to_judge() -> None:
    config = ReviewConfiguration(name="unchecked", kind=ConfigurationKind.UNCHECKED)
    rows = _rows(config, [])
    assert all(r.supported is None and r.member_outcomes == () for r in rows)
    metrics = review_metrics(rows).overall
    assert metrics.false_approval.rate == 1.0 and metrics.unsupported_permit.rate == 1.0
    assert metrics.supported_finding.rate is None


def test_graded_single_reviewer_rows_use_the_reviewers_support() -> None:
    single = ReviewConfiguration(
        name="single", kind=ConfigurationKind.SINGLE, members=(MemberIdentity(reviewer="f"),)
    )
    rows = _rows(single, ["forged-refs"])
    assert {r.observed for r in rows} == {X}
    assert not any(r.supported for r in rows)


RECORD_KEY = {"observed": "outcome"}
"""The row fields the per-trial record names differently; every other field keeps its name."""


def _as_recorded(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def test_every_field_of_a_graded_row_reaches_the_per_trial_record() -> None:
    case = CASES[1]
    members = (_graded("always-permit", case, 2), _graded("reference-policy", case, 2))
    row = configuration_row(case, 2, members)
    record = record_row("chain", ConfigurationRow("chain", row, members))
    for field in dataclasses.fields(ReviewTrialRow):
        key = RECORD_KEY.get(field.name, field.name)
        assert key in record, f"ReviewTrialRow.{field.name} is not in the per-trial record"
        assert record[key] == _as_recorded(getattr(row, field.name)), field.name
    assert (record["latency_s"], record["tokens"], record["cost_usd"]) == (0.5, 30, 1.0)
