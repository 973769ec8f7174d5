"""Marks computed once per kind of row give what asking every row gives (`MarksOf`)."""

from __future__ import annotations

import itertools

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
