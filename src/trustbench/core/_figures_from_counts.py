"""Turn per-trial events into a rate `Figure` on the declared unit of analysis (suite-independent).

Every track counts the same way once its grader has said, per trial, whether an event happened
(a false approval, a prohibited effect, a supported finding). This module does the rest, the
same for every track:

1. **Reduce to the declared unit** (`analysis.unit`). `trial` keeps every trial as a unit; `case`
   reduces the K trials of a case to one 0/1 value; `group` reduces all trials of a cluster
   (e.g. a domain group) to one value. The reduction is declared by the caller and recorded in
   the figure's description:

   - `any` (for error events): the unit has the event if *any* of its trials had it, the
     conservative any-violation-in-K reading a release gate needs (one false approval in K
     trials is a false approval of that case);
   - `all` (for success events): the unit has the event only if *every* trial had it (the
     observed pass^K of the unit).

2. **Exact and score intervals** on the reduced units: Clopper-Pearson and Wilson, each two-sided
   and as one-sided upper and lower bounds (the bound a "no more than x%" or "at least x%" gate
   compares). They assume independent units with a common rate.

3. **A clustered interval** (cluster-robust t on G - 1 df and the seeded cluster bootstrap, see
   `clustered_figure`) over the clusters, because related variants of one template are not
   independent discoveries. Not attached for the `group` unit, whose units are the clusters.

Sixty cases run K times are sixty cases: the K trials never multiply the denominator unless the
declared unit is `trial`, and then the clustered interval still treats groups as the units.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from trustbench.core._binomial import binomial_interval
from trustbench.core.figures import Figure, FigureUnit, Interval, counts_figure

Reduction = Literal["any", "all"]
"""How the trials of one unit become one 0/1 value: `any` trial had the event, or `all` did."""

BINOMIAL_METHODS: tuple[str, ...] = ("clopper_pearson", "wilson")
"""Binomial interval methods attached to every rate figure."""


@dataclass(frozen=True, slots=True)
class TrialEvent:
    """Whether one trial had the event, and where it belongs."""

    case_id: str
    """The case the trial ran."""
    cluster: str
    """The case's cluster (e.g. its domain group)."""
    hit: bool
    """True when the trial had the event being counted."""


class EventReducer:
    """`reduce_events`, one event at a time: per unit its cluster and folded value.

    Under `case` and `group` a unit keeps one value (`any` or `all` of its trials so far), so a
    million trials of fifty cases cost fifty entries; under `trial` every trial is a unit.
    """

    def __init__(self, unit: FigureUnit, reduction: Reduction) -> None:
        self.unit = unit
        self.reduction = reduction
        self._trials: list[tuple[str, bool]] = []
        self._keyed: dict[str, list[Any]] = {}

    def add(self, case_id: str, cluster: str, hit: bool) -> None:
        """Count one trial's event."""
        if self.unit == "trial":
            self._trials.append((cluster, hit))
            return
        key = case_id if self.unit == "case" else cluster
        folded = self._keyed.get(key)
        if folded is None:
            self._keyed[key] = [cluster, hit]
        elif self.reduction == "any":
            folded[1] = folded[1] or hit
        else:
            folded[1] = folded[1] and hit

    def units(self) -> list[tuple[str, bool]]:
        """One `(cluster, hit)` per unit, in first-seen order."""
        if self.unit == "trial":
            return list(self._trials)
        return [(cluster, hit) for cluster, hit in self._keyed.values()]


def reduce_events(
    events: Iterable[TrialEvent], unit: FigureUnit, reduction: Reduction
) -> list[tuple[str, bool]]:
    """Reduce trial events to one `(cluster, hit)` per unit, in first-seen order.

    Args:
        events: Per-trial events (only the trials in the population, e.g. deny-reference).
        unit: `trial`, `case` or `group`.
        reduction: `any` or `all` (ignored for `trial`).

    Returns:
        One `(cluster, hit)` per unit (see `EventReducer`).
    """
    reducer = EventReducer(unit, reduction)
    for event in events:
        reducer.add(event.case_id, event.cluster, event.hit)
    return reducer.units()


def binomial_intervals(k: int, n: int, confidence: float) -> list[Interval]:
    """Clopper-Pearson and Wilson intervals: two-sided, one-sided upper and one-sided lower."""
    return [
        binomial_interval(k, n, method, confidence, sidedness=sidedness)
        for sidedness in ("two_sided", "upper", "lower")
        for method in BINOMIAL_METHODS
    ]


def unit_rate_figure(
    name: str,
    events: Sequence[TrialEvent],
    *,
    unit: FigureUnit,
    reduction: Reduction,
    description: str,
    cluster: str = "group",
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = 10_000,
    clustered: bool = True,
) -> Figure:
    """A rate over the declared unit with exact, Wilson and clustered intervals.

    Args:
        name: Stable figure name (gates find it by this).
        events: Per-trial events of the population (the denominator's trials).
        unit: The declared unit of analysis.
        reduction: How a case's (or group's) trials become one value (see module docstring).
        description: What the denominator counts; the unit and reduction are appended.
        cluster: What a cluster is (e.g. `domain_group`).
        confidence: Confidence level of every interval.
        seed: Bootstrap seed (recorded in the interval).
        resamples: Bootstrap resamples (recorded in the interval).
        clustered: Attach the clustered intervals (off for per-cluster breakdowns, which hold
            one cluster).

    Returns:
        The figure; `not_applicable` (shown "n/a", never 0) when the population is empty.
    """
    units = reduce_events(events, unit, reduction)
    if unit == "trial":
        how = "each trial a unit"
    elif unit == "case":
        how = f"per case: {'any' if reduction == 'any' else 'every'} one of its K trials"
    else:
        how = f"per {cluster}: {'any' if reduction == 'any' else 'every'} one of its trials"
    full = f"{description} [unit {unit}; {how}]"
    n = len(units)
    k = sum(1 for _, hit in units if hit)

    def intervals() -> list[Interval]:
        found = binomial_intervals(k, n, confidence)
        if clustered and unit != "group":
            # numpy (for the clustered intervals) is loaded when a report needs one, not with
            # `trustbench.core`, which every command imports.
            from trustbench.core._resampling import clustered_figure

            found += clustered_figure(
                name,
                [1.0 if hit else 0.0 for _, hit in units],
                None,
                [c for c, _ in units],
                description=full,
                cluster=cluster,
                unit=unit,
                confidence=confidence,
                seed=seed,
                resamples=resamples,
            ).intervals
        return found

    return counts_figure(
        name,
        k,
        n,
        intervals,
        description=full,
        unit=unit,
        cluster=cluster,
        reason_if_empty="no unit in the population (denominator 0)",
    )
