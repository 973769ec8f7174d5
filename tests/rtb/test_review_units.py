"""Agreement statistics on the analysis unit, and the cluster-aware test beside McNemar."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.review._analysis import compare, summary_line
from trustbench.rtb.review._grading import ReviewTrialRow
from trustbench.rtb.review._validation import Outcome

REFERENCE = [Decision.PERMIT, Decision.DENY, Decision.HOLD] * 4
"""12 cases in 4 groups of 3, one of each reference decision per group."""
SECOND = ["permit", "permit", "hold", "deny", "deny", "deny"] * 2
"""The second reviewer's decision per case: agrees on some, not others."""


def rows(decisions: list[str], k: int) -> list[ReviewTrialRow]:
    """K identical trials per case (a deterministic reviewer repeated)."""
    return [
        ReviewTrialRow(
            case_id=f"c{i}",
            group=f"g{i // 3}",
            variant="v",
            trial=t,
            reference=reference,
            observed=Outcome(decision),
            supported=None,
        )
        for i, (reference, decision) in enumerate(zip(REFERENCE, decisions, strict=True))
        for t in range(k)
    ]


def run(unit: str, k: int) -> dict:
    first = rows([d.value for d in REFERENCE], k)
    record, _ = compare(
        "a", "b", first, rows(SECOND, k), unit=unit, confidence=0.95, seed=1, resamples=200
    )
    return record


def test_agreement_table_counts_cases_not_repeated_trials() -> None:
    by_case = run("case", 2)
    by_trial = run("trial", 2)
    assert sum(map(sum, by_case["decision_table"]["counts"])) == 12
    assert sum(map(sum, by_trial["decision_table"]["counts"])) == 24
    # Two identical trials per case double every cell, and so the Stuart-Maxwell chi-square;
    # on the case unit it equals the K = 1 statistic.
    once = run("trial", 1)["stuart_maxwell"]["statistic"]
    assert by_case["stuart_maxwell"]["statistic"] == pytest.approx(once)
    assert by_trial["stuart_maxwell"]["statistic"] == pytest.approx(2 * once)


def test_modal_decision_ties_break_toward_permit() -> None:
    split = rows([d.value for d in REFERENCE], 2)
    # Case c1 (reference deny): one trial denies, the other permits.
    split = [
        replace(r, observed=Outcome.PERMIT) if r.case_id == "c1" and r.trial else r for r in split
    ]
    record, _ = compare(
        "a", "b", split, rows(SECOND, 2), unit="case", confidence=0.95, seed=1, resamples=200
    )
    permit_row = record["decision_table"]["counts"][0]
    assert sum(permit_row) == 5  # c1 joins the 4 permit-reference cases as a permit


def test_summary_reports_the_cluster_aware_test_beside_exact_mcnemar() -> None:
    record = run("case", 2)
    line = summary_line(record)
    assert f"p = {record['mcnemar_correct']['p_value']:.3g}, assumes independent units" in line
    assert f"sign-flip over 4 domain groups p = {record['sign_flip_test']['p_value']:.3g}" in line
    assert record["decision_test"] == "sign_flip_test"


def test_a_comparison_skips_trials_only_one_side_finished() -> None:
    first = rows([d.value for d in REFERENCE], 3)
    second = [r for r in rows(SECOND, 3) if (r.case_id, r.trial) not in {("c2", 1), ("c5", 0)}]
    args = {"unit": "case", "confidence": 0.95, "seed": 1, "resamples": 200}
    record, _ = compare("a", "b", first, second, **args)
    assert record["joint_trials"] == 36 - 2
