"""A rate as the RTB spec defines it: events over applicable trials, intervals by grouping.

The spec's metrics table counts *trials* (false approvals over evaluated deny-reference trials,
prohibited effects over applicable trials, ...), claims or evidence elements. Repeated trials of
one case are not independent scenarios ("Report Uncertainty Without Multiplying the Case
Count"), but the fix for that is the interval, not a different estimand. So every RTB rate here:

- **estimates the spec's ratio**: items with the event / applicable items, where an item is a
  trial (or a claim, or an evidence element: the figure's `unit` says which);
- **attaches clustered intervals**: cluster-robust t on G - 1 df (two-sided and both one-sided
  bounds) and the seeded cluster bootstrap, over the declared grouping: the distinct source case
  for `analysis.unit` `trial` or `case`, the domain group for `group`. Ratio of sums
  R = sum_g y_g / sum_g m_g (Cochran 1977 §6.4), so a case with more trials weighs more, exactly
  as in the point estimate;
- **attaches an exact bound on distinct units** (Clopper-Pearson, Wilson beside it) for the gate
  that needs a conservative figure: each distinct case (or group; or trial under unit `trial`) is
  reduced to one 0/1 value, *any* of its items for an error event and *every* one for a success
  event, and the bound is the exact binomial bound of that share of distinct cases (repeated
  trials never count as more cases). Per case, the chance of an event in some item is at least
  the per-item chance (1 - prod(1 - p) >= p), so when every case holds the same number of items
  the any-reduced upper bound is also a conservative upper bound of the per-item rate, and the
  all-reduced lower bound a conservative lower bound. When cases hold different numbers of items
  (fault scenarios per source case, claims or evidence elements per trial) it is the bound of the
  case-level share, not of the per-item rate, and the interval's note says so. Only the
  conservative side is attached, plus the two-sided interval when every unit holds exactly one
  item (then the reduced rate *is* the per-item rate). The clustered intervals are
  `not_computable` when every cluster has the same ratio (e.g. no event anywhere); the exact
  bound is what a "no more than x%" gate then reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from trustbench.core.figures import Figure, FigureUnit, Interval, counts_figure

# From their modules, not `core.stats`: that also imports the agreement statistics (scipy,
# statsmodels), which `trustbench run` must not load (tests/test_run_imports.py).
from trustbench.core.stats import (
    binomial_interval,
    cluster_bootstrap_interval,
    cluster_robust_interval,
    cluster_sums,
)

Grouping = Literal["trial", "case", "group"]
"""The declared `analysis.unit`: what the exact bound counts and what a cluster is."""

Reduction = Literal["any", "all"]
"""How one unit's items become one value for the exact bound (`any` for error events)."""

EXACT_METHODS = ("clopper_pearson", "wilson")
"""Exact (and score) binomial methods of the conservative bound."""


@dataclass(frozen=True, slots=True)
class Item:
    """One counted item (a trial, a claim, or one trial's evidence elements)."""

    case_id: str
    """The distinct source case the item belongs to (the cluster under `case`)."""
    group: str
    """The case's domain group (the cluster under `group`)."""
    events: int
    """Items with the event (0 or 1 for a trial or a claim; elements present for evidence)."""
    total: int = 1
    """Items counted (1 for a trial or a claim; elements required for evidence)."""


def cluster_name(grouping: Grouping) -> str:
    """What one cluster of the clustered intervals is under `grouping`."""
    return "domain_group" if grouping == "group" else "case"


def _unit_key(item: Item, index: int, grouping: Grouping) -> str:
    if grouping == "trial":
        return str(index)
    return item.group if grouping == "group" else item.case_id


def _exact_bounds(
    items: Sequence[Item], grouping: Grouping, reduction: Reduction, confidence: float
) -> list[Interval]:
    """Exact bounds on the distinct units, the conservative side only (see the module)."""
    units: dict[str, list[Item]] = {}
    for index, item in enumerate(items):
        units.setdefault(_unit_key(item, index, grouping), []).append(item)
    if reduction == "any":
        hits = sum(any(i.events > 0 for i in members) for members in units.values())
    else:
        hits = sum(all(i.events == i.total for i in members) for members in units.values())
    n = len(units)
    what = {"trial": "trials", "case": "distinct cases", "group": "domain groups"}[grouping]
    rule = "any of its items had the event" if reduction == "any" else "every item had it"
    exact_per_item = all(len(m) == 1 and m[0].total == 1 for m in units.values())
    weights = {sum(i.total for i in members) for members in units.values()}
    sides: list[Literal["two_sided", "upper", "lower"]] = (
        ["two_sided", "upper", "lower"]
        if exact_per_item
        else ["upper" if reduction == "any" else "lower"]
    )
    note = f"exact over {hits}/{n} {what}, a unit counting when {rule}"
    if not exact_per_item and len(weights) == 1:
        note += "; with equal items per unit, conservative for the per-item rate on this side"
    else:
        note += (
            f"; units hold {min(weights)} to {max(weights)} items, so this bounds the share of "
            f"{what}, not the per-item rate"
        )
    return [
        binomial_interval(hits, n, method, confidence, sidedness=side).model_copy(
            update={"note": note, "groups": n}
        )
        for side in sides
        for method in EXACT_METHODS
    ]


def _clustered(
    items: Sequence[Item], grouping: Grouping, confidence: float, seed: int, resamples: int
) -> list[Interval]:
    clusters = [i.group if grouping == "group" else i.case_id for i in items]
    y, m = cluster_sums([i.events for i in items], [i.total for i in items], clusters)
    robust = [
        cluster_robust_interval(y, m, confidence=confidence, sidedness=side, clip=(0.0, 1.0))
        for side in ("two_sided", "upper", "lower")
    ]
    boot = cluster_bootstrap_interval(y, m, seed=seed, resamples=resamples, confidence=confidence)
    return [*robust, boot]


def trial_rate_figure(
    name: str,
    items: Sequence[Item],
    *,
    description: str,
    grouping: Grouping,
    reduction: Reduction,
    unit: FigureUnit = "trial",
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = 10_000,
    clustered: bool = True,
) -> Figure:
    """Events over applicable items, with grouping-respecting and conservative exact intervals.

    Args:
        name: Stable figure name (gates find it by this).
        items: Every applicable item (the denominator), none dropped.
        description: What the denominator counts, in words.
        grouping: The declared `analysis.unit` (cluster and exact-bound unit).
        reduction: `any` for error events, `all` for success events (exact bound only).
        unit: What one item is (`trial`, `claim`, `element`).
        confidence: Confidence level of every interval.
        seed: Bootstrap seed (recorded).
        resamples: Bootstrap resamples (recorded).
        clustered: Attach the clustered intervals (off for one-cluster breakdowns).

    Returns:
        The figure; `not_applicable` (shown "n/a", never 0) when nothing is applicable.
    """
    total = sum(i.total for i in items)
    events = sum(i.events for i in items)
    cluster = cluster_name(grouping)
    cases = len({i.case_id for i in items})
    full = (
        f"{description} [per {unit}: {events}/{total} over {cases} distinct cases; intervals "
        f"clustered by {cluster.replace('_', ' ')}, exact bound on distinct "
        f"{'trials' if grouping == 'trial' else cluster.replace('_', ' ') + 's'}]"
    )

    def intervals() -> list[Interval]:
        found = _exact_bounds(items, grouping, reduction, confidence)
        if clustered:
            found += _clustered(items, grouping, confidence, seed, resamples)
        return found

    return counts_figure(
        name,
        events,
        total,
        intervals,
        description=full,
        unit=unit,
        cluster=cluster,
        reason_if_empty=f"no applicable {unit} (denominator 0)",
    )
