"""Marks computed once per kind of row give what asking every row gives (`MarksOf`)."""

from __future__ import annotations

import itertools

import pytest

from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.review._rates import BUILT_IN, MarksOf, ReviewRate, marks_of
from trustbench.rtb.review._rows import ReviewTrialRow
from trustbench.rtb.review._validation import Outcome


def _rows() -> list[ReviewTrialRow]:
    """Every reference, outcome and support, each with varied undeclared fields."""
    rows = []
    for index, (reference, observed, supported) in enumerate(
        itertools.product(Decision, Outcome, (None, False, True))
    ):
        for trial, latency in ((0, None), (3, 0.25), (7, 12.5)):
            rows.append(
                ReviewTrialRow(
                    case_id=f"c{index % 5}",
                    group=f"g{index % 3}",
                    variant=f"v{index % 2}",
                    trial=trial,
                    reference=reference,
                    observed=observed,
                    supported=supported,
                    latency_s=latency,
                    tokens=None if latency is None else trial * 10,
                    cost_usd=latency,
                    member_outcomes=(observed,) * (trial % 3),
                )
            )
    return rows


def test_built_in_rates_read_only_the_fields_they_declare() -> None:
    """Rows equal on the declared fields get equal marks, however the others differ."""
    by_kind: dict[object, set[tuple[int, ...]]] = {}
    for row in _rows():
        kind = (row.reference, row.observed, row.supported)
        by_kind.setdefault(kind, set()).add(marks_of(row, BUILT_IN))
    assert all(rate.reads is not None for rate in BUILT_IN)
    assert all(len(marks) == 1 for marks in by_kind.values())


def test_marks_by_kind_equal_marks_asked_of_every_row() -> None:
    marks = MarksOf(BUILT_IN)
    assert [marks(row) for row in _rows()] == [marks_of(row, BUILT_IN) for row in _rows()]


def test_a_rate_that_declares_no_fields_is_asked_of_every_row() -> None:
    """A registered rate reading the trial index (not declared) still sees each trial."""
    first_trials = ReviewRate(
        name="first_trial_permit_rate",
        label="permit / first trials",
        description="observed permit / first trials",
        population=lambda row: row.trial == 0,
        event=lambda row: row.observed is Outcome.PERMIT,
        reduction="any",
    )
    rates = (*BUILT_IN, first_trials)
    marks = MarksOf(rates)
    rows = _rows()
    assert [marks(row) for row in rows] == [marks_of(row, rates) for row in rows]
    assert {marks(row)[-1] for row in rows} == {-1, 0, 1}


def test_trials_alike_but_for_their_index_count_as_each_trial_would() -> None:
    from trustbench.rtb.review._counting import ConfigurationTally
    from trustbench.rtb.review._grading import ConfigurationRow

    at_once, each = ConfigurationTally(baseline=True), ConfigurationTally(baseline=True)
    for index, reference in enumerate(Decision):
        row = ReviewTrialRow(
            case_id=f"c{index}", group="g", variant="v", trial=0, reference=reference,
            observed=Outcome.PERMIT, supported=None,
        )  # fmt: skip
        at_once.add_alike(row, 4)
        for trial in range(4):
            each.add(ConfigurationRow("unchecked", _replace_trial(row, trial), ()))
    assert at_once.metrics.result() == each.metrics.result()
    assert at_once.evaluability == each.evaluability
    assert at_once.figures.by_case == each.figures.by_case
    assert {n: t.units("case") for n, t in at_once.figures.tallies.items()} == {
        n: t.units("case") for n, t in each.figures.tallies.items()
    }


def test_trials_are_not_counted_at_once_when_a_rate_may_read_the_index() -> None:
    from trustbench.rtb.review._counting import ConfigurationTally
    from trustbench.rtb.review._rates import register_review_metric, unregister_review_metric

    undeclared = ReviewRate(
        name="undeclared_fields_rate",
        label="permit / all",
        description="observed permit / all trials",
        population=lambda row: True,
        event=lambda row: row.observed is Outcome.PERMIT,
        reduction="any",
    )
    register_review_metric(undeclared)
    try:
        tally = ConfigurationTally(baseline=True)
        assert not tally.counts_alike_trials
        with pytest.raises(ValueError, match="trial index"):
            tally.add_alike(_rows()[0], 3)
    finally:
        unregister_review_metric(undeclared.name)


def _replace_trial(row: ReviewTrialRow, trial: int) -> ReviewTrialRow:
    from dataclasses import replace

    return replace(row, trial=trial)
