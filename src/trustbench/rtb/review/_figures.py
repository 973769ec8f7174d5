"""Headline figures of one reviewer configuration, each a rate as the spec defines it.

Every rate is declared once in `review/_rates.py`; this module turns each declaration into a
`Figure` with `rtb._trial_rates.trial_rate_figure`: the estimate is per evaluated trial (false
approvals over evaluated trials of deny-reference cases, and so on), the intervals are clustered
by case (by domain group under `analysis.unit = "group"`), and the exact bound on distinct cases
(a case counts when any of its K trials had an error event, or when every trial had a success
event) is the conservative figure a "no more than x%" gate reads. `correct_pass_hat_k` (the
unbiased per-case pass^K of "decision equals the reference", averaged over cases, with
clustered intervals) is reported beside them, per case.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from trustbench.core.figures import Figure, FigureUnit, not_run_figure
from trustbench.core.stats import clustered_figure, pass_hat_k
from trustbench.rtb._trial_rates import Item, RateTally, trial_rate_figure
from trustbench.rtb.review._rates import (
    RESERVED,
    Marks,
    ReviewRate,
    headline_names,
    marks_of,
    review_rates,
)
from trustbench.rtb.review._rows import ReviewTrialRow

CLUSTER = "domain_group"
"""What a cluster of the pass^K figure is in this track."""

PASS_HAT_K = "correct_pass_hat_k"
"""Name of the pass^K figure reported beside the rates."""


assert PASS_HAT_K in RESERVED


def items(rows: Sequence[ReviewTrialRow], rate: ReviewRate) -> list[Item]:
    """The trials of one rate's population, each with whether it had the event."""
    return [
        Item(row.case_id, row.group, int(rate.event(row))) for row in rows if rate.population(row)
    ]


class FigureTally:
    """What a configuration's figures read, added row by row (no row is held).

    One `RateTally` per declared rate (its population's trials, per case) and, per case, its
    group, trials and correct decisions (for pass^K). `report` feeds it each configuration
    trial once, as the trials stream, and computes the figures from the sums.
    """

    def __init__(
        self,
        *,
        baseline: bool = False,
        only: tuple[str, ...] | None = None,
        rates: tuple[ReviewRate, ...] | None = None,
    ) -> None:
        declared = review_rates() if rates is None else rates
        self.baseline = baseline
        self.only = only
        self.rates = [r for r in declared if only is None or r.name in only]
        self._counted = [r for r in self.rates if not (baseline and r.needs_finding)]
        self._tallies = {rate.name: RateTally() for rate in self._counted}
        self._declared = declared
        self._slots = [
            (index, self._tallies[rate.name])
            for index, rate in enumerate(declared)
            if rate.name in self._tallies
        ]
        """Each counted rate's index in `declared` (the order of a row's `Marks`)."""
        self.rows = 0
        self._by_case: dict[str, list[Any]] = {}
        self._pending: dict[tuple[str, str, Marks, bool], int] = {}
        """Trials not yet summed, by (case, group, marks, correct). A case's trials are of a few
        kinds, so a row costs one count here instead of one per rate; the sums are made when
        read, in the order each kind was first seen (so each case keeps its first-seen place,
        which orders the clusters and seeds the bootstrap)."""

    def add(self, row: ReviewTrialRow, marks: Marks | None = None, count: int = 1) -> None:
        """Count one trial of the configuration, or `count` alike but for their index.

        `marks`: its `marks_of` the declared rates.
        """
        self.rows += count
        if marks is None:
            marks = marks_of(row, self._declared)
        kind = (row.case_id, row.group, marks, row.observed == row.reference)
        self._pending[kind] = self._pending.get(kind, 0) + count

    def _sum_pending(self) -> None:
        for (case_id, group, marks, correct), n in self._pending.items():
            for index, tally in self._slots:
                mark = marks[index]
                if mark >= 0:
                    tally.add(case_id, group, mark, count=n)
            case = self._by_case.get(case_id)
            if case is None:
                case = self._by_case[case_id] = [group, 0, 0]
            case[1] += n
            case[2] += correct * n
        self._pending.clear()

    @property
    def tallies(self) -> dict[str, RateTally]:
        """Each counted rate's `RateTally`."""
        self._sum_pending()
        return self._tallies

    @property
    def by_case(self) -> dict[str, list[Any]]:
        """Case -> [group, trials, trials reaching the reference decision], first-seen order."""
        self._sum_pending()
        return self._by_case


def pass_hat_k_figure(
    rows: Sequence[ReviewTrialRow] | FigureTally,
    k: int,
    *,
    confidence: float,
    seed: int,
    resamples: int,
) -> Figure:
    """Mean over cases of the unbiased pass^K of a correct decision (cases with K trials run)."""
    tally = rows if isinstance(rows, FigureTally) else _tally(rows, baseline=False, only=())
    complete = [v for v in tally.by_case.values() if v[1] >= k]
    values = [pass_hat_k(v[2], v[1], k) for v in complete]
    description = (
        f"per case, chance that {k} fresh trials all reach the reference decision "
        f"(unbiased C(c,{k})/C(n,{k})), averaged over cases with {k} trials run"
    )
    if not complete:  # an interrupted run may have no case with all K trials: not run, not 0
        reason = f"no case has all {k} trials finished (interrupted run)"
        return not_run_figure(PASS_HAT_K, description=description, reason=reason, unit="case")
    return clustered_figure(
        PASS_HAT_K,
        values,
        None,
        [v[0] for v in complete],
        description=description,
        cluster=CLUSTER,
        unit="case",
        confidence=confidence,
        seed=seed,
        resamples=resamples,
    )


def rate_figure_of(
    rate: ReviewRate,
    rows: Sequence[ReviewTrialRow] | FigureTally,
    *,
    unit: FigureUnit,
    confidence: float,
    seed: int,
    resamples: int,
    clustered: bool,
    baseline: bool,
) -> Figure:
    """One declared rate of one configuration (not run without trials)."""
    if not (rows.rows if isinstance(rows, FigureTally) else rows):
        return not_run_figure(
            rate.name,
            description=rate.description,
            reason="no trial of this configuration finished",
        )
    if baseline and rate.needs_finding:
        return Figure(
            name=rate.name,
            status="not_applicable",
            description=rate.description,
            reason="the unchecked baseline gives no finding to judge",
        )
    return trial_rate_figure(
        rate.name,
        rows.tallies[rate.name] if isinstance(rows, FigureTally) else items(rows, rate),
        description=rate.description,
        grouping="trial" if unit == "trial" else unit,  # type: ignore[arg-type]
        reduction=rate.reduction,
        confidence=confidence,
        seed=seed,
        resamples=resamples,
        clustered=clustered,
    )


def _tally(
    rows: Iterable[ReviewTrialRow], *, baseline: bool, only: tuple[str, ...] | None
) -> FigureTally:
    tally = FigureTally(baseline=baseline, only=only)
    for row in rows:
        tally.add(row)
    return tally


def configuration_figures(
    rows: Iterable[ReviewTrialRow] | FigureTally,
    *,
    unit: FigureUnit,
    k: int,
    confidence: float,
    seed: int,
    resamples: int,
    clustered: bool = True,
    baseline: bool = False,
    only: tuple[str, ...] | None = None,
) -> list[Figure]:
    """Every declared figure of one configuration (not run when it has no trial).

    `unit` is the declared `analysis.unit`: the grouping of the intervals (every rate is per
    trial). `only` restricts the rates computed (the breakdowns show the headline ones). `rows`
    may be the configuration's `FigureTally` (made with the same `baseline` and `only`).
    """
    tally = rows if isinstance(rows, FigureTally) else _tally(rows, baseline=baseline, only=only)
    args = {"confidence": confidence, "seed": seed, "resamples": resamples}
    figures = [
        rate_figure_of(rate, tally, unit=unit, clustered=clustered, baseline=baseline, **args)
        for rate in tally.rates
    ]
    if tally.rows and clustered and not baseline and only is None:
        figures.append(pass_hat_k_figure(tally, k, **args))
    return figures


def headline() -> tuple[str, ...]:
    """The rates shown in the forest plots and the breakdowns (declared in `_rates`)."""
    return headline_names()


def figure_names() -> set[str]:
    """Every figure name a reviewer configuration can have (what a gate may name)."""
    return {rate.name for rate in review_rates()} | {PASS_HAT_K}
