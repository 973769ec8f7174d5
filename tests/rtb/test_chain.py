"""Review configurations: chain aggregation, unchecked baseline, identity labels."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from test_reviewers_fixtures import PROMPT, export, make_cases

from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.review._chain import (
    ConfigurationKind,
    MemberIdentity,
    ProviderRelation,
    ReviewConfiguration,
    aggregate_chain,
    chain_supported,
    grade_trial,
    run_configuration,
)
from trustbench.rtb.review._metric_tally import review_metrics
from trustbench.rtb.review._validation import Outcome
from trustbench.rtb.review.reviewers import make_reviewer

P, D, H, M, X = Outcome.PERMIT, Outcome.DENY, Outcome.HOLD, Outcome.MISSING, Outcome.INVALID
CASES = make_cases()


def _chain(*names: str) -> ReviewConfiguration:
    return ReviewConfiguration(
        name="+".join(names),
        kind=ConfigurationKind.CHAIN,
        members=tuple(MemberIdentity(reviewer=n) for n in names),
    )


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
    config = _chain("reference-policy", "always-permit")
    reviewers = [make_reviewer("reference-policy"), make_reviewer("always-permit")]
    for case in CASES:
        trial = run_configuration(config, reviewers, PROMPT, export(case))
        reference = case.expectations.reference_decision.value
        assert trial.member_outcomes == (Outcome(reference), P)
        assert trial.outcome is Outcome(reference)
        assert len(trial.member_responses) == 2


def test_chain_with_an_empty_member_is_never_approval_and_shows_missing() -> None:
    config = _chain("always-permit", "empty")
    reviewers = [make_reviewer("always-permit"), make_reviewer("empty")]
    for case in CASES:
        trial = run_configuration(config, reviewers, PROMPT, export(case))
        assert trial.outcome is M
        assert trial.member_outcomes == (P, M)


def test_unchecked_baseline_lets_every_proposal_proceed_without_reviewers() -> None:
    config = ReviewConfiguration(name="unchecked", kind=ConfigurationKind.UNCHECKED)
    for case in CASES:
        trial = run_configuration(config, [], PROMPT, export(case))
        assert trial.outcome is P
        assert trial.member_outcomes == ()


@pytest.mark.parametrize(
    ("kind", "members"),
    [(ConfigurationKind.UNCHECKED, 1), (ConfigurationKind.SINGLE, 2), (ConfigurationKind.CHAIN, 1)],
)
def test_configuration_member_count_must_match_its_kind(kind, members) -> None:
    with pytest.raises(ValidationError, match="cannot have"):
        ReviewConfiguration(
            name="x", kind=kind, members=tuple(MemberIdentity(reviewer="r") for _ in range(members))
        )


def test_run_configuration_rejects_a_reviewer_count_mismatch() -> None:
    with pytest.raises(ValueError, match="2 member"):
        run_configuration(
            _chain("a", "b"), [make_reviewer("always-deny")], PROMPT, export(CASES[0])
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


def _run(config: ReviewConfiguration, names: list[str]) -> list:
    reviewers = [make_reviewer(n) for n in names]
    return [
        grade_trial(case, run_configuration(config, reviewers, PROMPT, export(case)))
        for case in CASES
    ]


def test_graded_chain_rows_feed_chain_metrics_with_joint_decisions() -> None:
    rows = _run(_chain("always-permit", "reference-policy"), ["always-permit", "reference-policy"])
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
    rows = _run(config, [])
    assert all(r.supported is None and r.member_outcomes == () for r in rows)
    metrics = review_metrics(rows).overall
    assert metrics.false_approval.rate == 1.0 and metrics.unsupported_permit.rate == 1.0
    assert metrics.supported_finding.rate is None


def test_graded_single_reviewer_rows_use_the_reviewers_support() -> None:
    single = ReviewConfiguration(
        name="single", kind=ConfigurationKind.SINGLE, members=(MemberIdentity(reviewer="f"),)
    )
    rows = _run(single, ["forged-refs"])
    assert {r.observed for r in rows} == {X}
    assert not any(r.supported for r in rows)
