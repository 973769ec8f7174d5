"""`unit_rate_figure`: per-trial events -> a rate on the declared unit, with its intervals."""

from __future__ import annotations

import pytest

from trustbench.core._figures_from_counts import TrialEvent, reduce_events, unit_rate_figure


def _events(hits_per_case: dict[str, list[bool]], groups: int = 4) -> list[TrialEvent]:
    return [
        TrialEvent(case, f"g{index % groups}", hit)
        for index, (case, hits) in enumerate(hits_per_case.items())
        for hit in hits
    ]


def test_any_reduction_marks_a_case_with_one_event_in_k_trials() -> None:
    events = _events({"a": [False, True, False], "b": [False, False, False]})
    assert [hit for _, hit in reduce_events(events, "case", "any")] == [True, False]
    assert [hit for _, hit in reduce_events(events, "case", "all")] == [False, False]


def test_case_unit_counts_cases_not_trials() -> None:
    events = _events({f"c{i}": [i == 0, False, False] for i in range(8)})
    figure = unit_rate_figure("x_rate", events, unit="case", reduction="any", description="d")
    assert (figure.numerator, figure.denominator, figure.unit_count) == (1, 8, 8)
    by_trial = unit_rate_figure("x_rate", events, unit="trial", reduction="any", description="d")
    assert (by_trial.numerator, by_trial.denominator) == (1, 24)


def test_zero_events_in_twenty_cases_bound_the_rate_below_0_139() -> None:
    # One-sided 95% Clopper-Pearson upper bound at 0/n solves (1 - U)^n = 0.05.
    events = _events({f"c{i}": [False, False] for i in range(20)})
    figure = unit_rate_figure("x_rate", events, unit="case", reduction="any", description="d")
    upper = figure.interval("clopper_pearson", 0.95, "upper")
    assert upper is not None and upper.upper == pytest.approx(1 - 0.05 ** (1 / 20), abs=1e-9)
    assert figure.interval("wilson", 0.95, "lower") is not None


def test_an_empty_population_is_not_applicable_never_zero() -> None:
    figure = unit_rate_figure("x_rate", [], unit="case", reduction="any", description="d")
    assert figure.status == "not_applicable" and figure.estimate is None
    assert figure.intervals == []


def test_clustered_intervals_record_groups_seed_and_resamples_except_for_the_group_unit() -> None:
    events = _events({f"c{i}": [i % 3 == 0] for i in range(12)}, groups=4)
    figure = unit_rate_figure(
        "x_rate", events, unit="case", reduction="any", description="d", seed=5, resamples=300
    )
    boot = figure.interval("cluster_bootstrap_percentile", 0.95)
    assert boot is not None and (boot.seed, boot.resamples, boot.groups) == (5, 300, 4)
    assert figure.interval("cluster_robust_t", 0.95) is not None
    grouped = unit_rate_figure("x_rate", events, unit="group", reduction="any", description="d")
    assert grouped.denominator == 4
    assert {i.method for i in grouped.intervals} == {"clopper_pearson", "wilson"}
