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

from collections.abc import Sequence

from trustbench.core.figures import Figure, FigureUnit, not_run_figure
from trustbench.core.stats import clustered_figure, pass_hat_k
from trustbench.rtb._trial_rates import Item, trial_rate_figure
from trustbench.rtb.review._rates import RESERVED, ReviewRate, headline_names, review_rates
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


def pass_hat_k_figure(
    rows: Sequence[ReviewTrialRow], k: int, *, confidence: float, seed: int, resamples: int
) -> Figure:
    """Mean over cases of the unbiased pass^K of a correct decision (cases with K trials run)."""
    by_case: dict[str, tuple[str, list[bool]]] = {}
    for row in rows:
        correct = row.observed.value == row.reference.value
        by_case.setdefault(row.case_id, (row.group, []))[1].append(correct)
    complete = {c: v for c, v in by_case.items() if len(v[1]) >= k}
    values = [pass_hat_k(sum(v[1]), len(v[1]), k) for v in complete.values()]
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
        [v[0] for v in complete.values()],
        description=description,
        cluster=CLUSTER,
        unit="case",
        confidence=confidence,
        seed=seed,
        resamples=resamples,
    )


def rate_figure_of(
    rate: ReviewRate,
    rows: Sequence[ReviewTrialRow],
    *,
    unit: FigureUnit,
    confidence: float,
    seed: int,
    resamples: int,
    clustered: bool,
    baseline: bool,
) -> Figure:
    """One declared rate of one configuration (not run without trials)."""
    if not rows:
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
        items(rows, rate),
        description=rate.description,
        grouping="trial" if unit == "trial" else unit,  # type: ignore[arg-type]
        reduction=rate.reduction,
        confidence=confidence,
        seed=seed,
        resamples=resamples,
        clustered=clustered,
    )


def configuration_figures(
    rows: Sequence[ReviewTrialRow],
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
    trial). `only` restricts the rates computed (the breakdowns show the headline ones).
    """
    args = {"confidence": confidence, "seed": seed, "resamples": resamples}
    figures = [
        rate_figure_of(rate, rows, unit=unit, clustered=clustered, baseline=baseline, **args)
        for rate in review_rates()
        if only is None or rate.name in only
    ]
    if rows and clustered and not baseline and only is None:
        figures.append(pass_hat_k_figure(rows, k, **args))
    return figures


def headline() -> tuple[str, ...]:
    """The rates shown in the forest plots and the breakdowns (declared in `_rates`)."""
    return headline_names()


def figure_names() -> set[str]:
    """Every figure name a reviewer configuration can have (what a gate may name)."""
    return {rate.name for rate in review_rates()} | {PASS_HAT_K}
