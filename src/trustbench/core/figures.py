"""The `Figure`: one reported number with its denominator, unit, status and intervals.

A `Figure` is a public contract: tracks put lists of them into `record.json` and the report
renders them. Its invariants carry the spec's reporting rules ("Publish a Reproducible Record"):

- an unrun figure has `status="not_run"` and no numbers at all (never zero);
- a figure whose denominator is zero is `status="not_applicable"` with `estimate=None`
  (shown "n/a"), e.g. unsupported completion claims when nothing claimed completion;
- every measured figure states its denominator and what that denominator counts;
- a figure of a subject that mostly gave no valid response is `status="not_evaluable"`: its
  numerator and denominator stay (they are what happened), its estimate and intervals are
  withheld (shown "not evaluable"), because a 0% false-approval rate from a reviewer that never
  answered is not a measurement of anything (see `core._evaluability`).

The validator enforces these, so a track cannot build a figure that breaks them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import Field, model_validator

from trustbench.core._binomial import Interval, Sidedness, _Contract, binomial_interval

__all__ = [
    "Figure",
    "FigureKind",
    "FigureStatus",
    "FigureUnit",
    "Interval",
    "Sidedness",
    "not_run_figure",
    "rate_figure",
]


# ------------------------------------------------------------------------------------------------
# `FigureUnit`, the unit of a figure's denominator, in a leaf module.
#
# A gate declares the unit its figure must be in (`GateSpec.unit`), and gates are part of every
# spec; keeping the name here lets the spec be read without importing the figure and interval
# models and the statistics behind them, which only `report` uses (issue 35).

FigureUnit = Literal["trial", "case", "group", "scenario", "claim", "element"]
"""What one unit of the denominator is: a trial, a case (K trials reduced), a group, a scenario
(a derived case, K trials reduced), a completion claim, or a required evidence element."""


FigureStatus = Literal["measured", "not_run", "not_applicable", "not_evaluable"]
"""Whether a figure was measured, not run at all, run but undefined (denominator 0), or run for a
subject whose responses were mostly missing or invalid (its estimate withheld)."""


FigureKind = Literal["rate", "mean", "difference"]
"""How to read the estimate: a proportion in [0, 1], a mean of unit values, or a difference."""


class Figure(_Contract):
    """One reported estimate: numerator over denominator, with unit, status and intervals."""

    name: str
    """Stable machine name, e.g. `false_approval_rate`; gates refer to figures by it."""

    kind: FigureKind = "rate"
    """`rate` (a proportion, shown as a percentage), `mean` or `difference`."""

    status: FigureStatus = "measured"
    """`measured`; `not_run` (no numbers, shown "not run", never 0); `not_applicable` (run, but
    the denominator is 0, so the estimate is undefined and shown "n/a"); or `not_evaluable`
    (run, but its subject is not evaluable: counts kept, estimate withheld, shown
    "not evaluable")."""

    numerator: int | float | None = None
    """Count (or sum of unit values) over the denominator; `None` when not run."""

    denominator: int | float | None = None
    """Count of units (or, for a ratio over groups, of the items they contain); `None` when
    not run."""

    estimate: float | None = None
    """numerator / denominator (or the named estimator's value); `None` unless measured."""

    unit: FigureUnit = "trial"
    """What one unit is: `trial`, `case` (a per-case value from its K trials) or `group`."""

    unit_count: int | None = None
    """How many units the figure is computed over; `None` when not run."""

    cluster: str | None = None
    """What a group (cluster) is when the unit or an interval is clustered, e.g.
    `domain_group` or `trace`; `None` when nothing is clustered."""

    description: str
    """What the denominator counts, in words, e.g. "evaluated cases whose reference decision
    is deny (missing and invalid responses included)"."""

    reason: str | None = None
    """Why a figure is `not_run`, `not_applicable` or `not_evaluable`; `None` when measured."""

    intervals: list[Interval] = Field(default_factory=list)
    """Confidence intervals / bounds for the estimate; empty unless measured."""

    @model_validator(mode="after")
    def _status_matches_numbers(self) -> Figure:
        """Enforce the reporting rules: unrun is null, undefined is n/a, measured has numbers."""
        if self.status == "not_run":
            if any(v is not None for v in (self.numerator, self.denominator, self.estimate)):
                raise ValueError(f"figure {self.name!r}: a not_run figure carries no numbers")
            if self.intervals:
                raise ValueError(f"figure {self.name!r}: a not_run figure has no intervals")
        elif self.status in ("not_applicable", "not_evaluable"):
            if self.estimate is not None or self.intervals:
                raise ValueError(
                    f"figure {self.name!r}: a {self.status} figure has no estimate or interval"
                )
            if self.status == "not_evaluable" and not self.reason:
                raise ValueError(f"figure {self.name!r}: a not_evaluable figure says why")
        else:
            if self.estimate is None or self.denominator is None or self.denominator <= 0:
                raise ValueError(
                    f"figure {self.name!r}: a measured figure needs an estimate and a "
                    "positive denominator (use status='not_applicable' when it is 0)"
                )
            if self.kind == "rate" and not 0.0 <= self.estimate <= 1.0:
                raise ValueError(f"figure {self.name!r}: a rate must lie in [0, 1]")
        return self

    def interval(
        self, method: str, confidence: float, sidedness: Sidedness = "two_sided"
    ) -> Interval | None:
        """Return the interval with this method, level and sidedness, or `None` if absent."""
        for candidate in self.intervals:
            if (
                candidate.method == method
                and abs(candidate.confidence - confidence) < 1e-12
                and candidate.sidedness == sidedness
            ):
                return candidate
        return None


def not_run_figure(
    name: str,
    *,
    description: str,
    reason: str,
    kind: FigureKind = "rate",
    unit: FigureUnit = "trial",
) -> Figure:
    """Build the figure for a metric that was not run: no numbers, shown "not run".

    Args:
        name: Figure name.
        description: What the denominator would have counted.
        reason: Why it was not run (e.g. "track control was not part of this experiment").
        kind: How the estimate would be read.
        unit: What one unit would have been.

    Returns:
        A `Figure` with `status="not_run"`.
    """
    return Figure(
        name=name, kind=kind, status="not_run", unit=unit, description=description, reason=reason
    )


def rate_figure(
    name: str,
    numerator: int,
    denominator: int,
    *,
    description: str,
    unit: FigureUnit = "trial",
    confidence: float = 0.95,
    methods: tuple[str, ...] = ("clopper_pearson", "wilson"),
    one_sided_upper: bool = False,
    reason_if_empty: str = "denominator is 0",
    cluster: str | None = None,
) -> Figure:
    """Build a rate figure from counts, with exact (and Wilson) binomial intervals.

    Binomial intervals assume the `denominator` units are independent with a common rate. Use
    them for case- or trial-level counts only when that is defensible; otherwise add a
    clustered interval (`trustbench.core.stats.cluster_ratio_interval`).

    Args:
        name: Figure name.
        numerator: Units with the event (e.g. permits on deny-reference cases).
        denominator: Units evaluated; 0 gives a `not_applicable` figure, never a rate of 0.
        description: What the denominator counts.
        unit: What one unit is.
        confidence: Confidence level of every interval.
        methods: Binomial methods to attach: `clopper_pearson` and/or `wilson`.
        one_sided_upper: Also attach the one-sided upper bound of each method (the bound a
            "no more than x%" gate compares).
        reason_if_empty: Reason recorded when the denominator is 0.
        cluster: What a group is, if the unit is `group`.

    Returns:
        The `Figure`.

    Raises:
        ValueError: Counts are negative or the numerator exceeds the denominator.
    """
    if numerator < 0 or denominator < 0 or numerator > denominator:
        raise ValueError(f"figure {name!r}: need 0 <= numerator <= denominator")

    def intervals() -> list[Interval]:
        found = [binomial_interval(numerator, denominator, m, confidence) for m in methods]
        if one_sided_upper:
            found += [
                binomial_interval(numerator, denominator, m, confidence, sidedness="upper")
                for m in methods
            ]
        return found

    return counts_figure(
        name,
        numerator,
        denominator,
        intervals,
        description=description,
        unit=unit,
        cluster=cluster,
        reason_if_empty=reason_if_empty,
    )


def counts_figure(
    name: str,
    numerator: int,
    denominator: int,
    intervals: Callable[[], list[Interval]],
    *,
    description: str,
    unit: FigureUnit,
    cluster: str | None,
    reason_if_empty: str,
) -> Figure:
    """Build the rate figure `numerator / denominator` of counted units with given intervals.

    Every rate built from counts (binomial, clustered or exact-bound intervals alike) goes
    through here, so an empty population is always `not_applicable` (shown "n/a", never 0).

    Args:
        name: Figure name.
        numerator: Units with the event.
        denominator: Units evaluated.
        intervals: Builds the figure's intervals; called only when the denominator is not 0.
        description: What the denominator counts.
        unit: What one unit is.
        cluster: What a group is, if intervals are clustered.
        reason_if_empty: Reason recorded when the denominator is 0.

    Returns:
        The `Figure`.
    """
    if denominator == 0:
        return Figure(
            name=name,
            status="not_applicable",
            numerator=numerator,
            denominator=0,
            unit=unit,
            unit_count=0,
            cluster=cluster,
            description=description,
            reason=reason_if_empty,
        )
    return Figure(
        name=name,
        numerator=numerator,
        denominator=denominator,
        estimate=numerator / denominator,
        unit=unit,
        unit_count=denominator,
        cluster=cluster,
        description=description,
        intervals=intervals(),
    )
