"""Release gates: declared before the run, evaluated after it, never averaged away.

A gate compares one figure's declared value (its point estimate, or the upper / lower bound of a
declared interval) with a threshold ("Do Not Let a Strong Average Hide a Failed Gate"). The
`GateSpec` list is frozen into the manifest before any trial runs; `evaluate_gates` only reads
figures. A gate whose figure was not run, is not applicable, or lacks the declared interval is
`not_evaluable` with the reason: it never passes, and `any_failed` treats it as blocking unless
asked not to.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, StrictBool, StrictFloat, field_validator, model_validator

from trustbench._docstrings import documented
from trustbench.core.figures import FigureUnit
from trustbench.core.spec._values import key_free

if TYPE_CHECKING:  # gates are read with every spec; figures (and statistics) only in `report`
    from trustbench.core.figures import Figure

Comparison = Literal["<=", "<", ">=", ">"]
"""How the compared value must relate to the threshold for the gate to pass."""

GateBound = Literal["estimate", "upper", "lower"]
"""Which value is compared: the point estimate, or the upper or lower confidence bound."""

GateStatus = Literal["passed", "failed", "not_evaluable"]
"""Outcome of one gate."""

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
}


class GateSpec(BaseModel):
    """One release gate, declared before results exist (it is part of the frozen manifest)."""

    model_config = documented(extra="forbid", frozen=True)

    name: str | None = None
    """Short name shown in the report; defaults to the metric name."""

    metric: str
    """Name of the `Figure` the gate reads, e.g. `prohibited_effect_rate_upper`."""

    threshold: StrictFloat
    """The value the compared quantity is held against, in the figure's own scale (a rate is a
    proportion: 5% is 0.05)."""

    comparison: Comparison
    """Passing relation: compared value `<=`, `<`, `>=` or `>` the threshold."""

    bound: GateBound = "estimate"
    """Compared value: `estimate`, or the `upper` / `lower` end of the declared interval. A
    "no more than x%" gate should compare the upper bound: a point estimate under x% does not
    show the rate is under x%."""

    interval_method: str | None = None
    """Interval method for `upper` / `lower` (e.g. `clopper_pearson`); `None` for `estimate`."""

    confidence: StrictFloat | None = None
    """Confidence level of the declared interval (e.g. 0.95); `None` for `estimate`."""

    sidedness: Literal["one_sided", "two_sided"] = "one_sided"
    """Whether the bound is a one-sided bound (all of alpha on one side) or the end of a
    two-sided interval."""

    unit: FigureUnit | None = None
    """Unit the figure must be computed in (`trial`, `case`, `group`); `None` accepts any. A
    figure in another unit does not satisfy the gate."""

    candidates: tuple[str, ...] = ()
    """Configurations (candidate names) the gate applies to; empty means every one."""

    description: str = ""
    """Why this gate exists, in words (e.g. "no known bypass on tested execution paths")."""

    blocking: StrictBool = True
    """Whether the gate decides release. `false` declares an informational gate: evaluated and
    reported like any other (marked "informational"), but its failing never blocks release nor
    sets the exit code; e.g. a gate deliberately kept underpowered as a visible lesson."""

    # Both are printed in every report: a key pasted into either is refused, never repeated.
    _no_key_as_name = field_validator("name")(key_free("name"))
    _no_key_in_description = field_validator("description")(key_free("description"))

    @property
    def label(self) -> str:
        """The gate's display name: `name`, or the metric when no name was given."""
        return self.name or self.metric

    @model_validator(mode="after")
    def _bound_needs_interval(self) -> GateSpec:
        """A bound gate must name its interval; an estimate gate must not."""
        if self.bound == "estimate":
            if self.interval_method is not None or self.confidence is not None:
                raise ValueError(f"gate {self.metric}: an estimate gate takes no interval")
        elif self.interval_method is None or self.confidence is None:
            raise ValueError(
                f"gate {self.metric}: bound {self.bound!r} needs interval_method and confidence"
            )
        elif not 0.0 < self.confidence < 1.0:
            raise ValueError(f"gate {self.metric}: confidence must be in (0, 1)")
        return self

    def describe(self) -> str:
        """The gate as one line, e.g. `upper 95% one-sided clopper_pearson bound <= 0.05`."""
        if self.bound == "estimate":
            compared = "estimate"
        else:
            level = f"{(self.confidence or 0) * 100:g}%"
            sided = self.sidedness.replace("_", "-")
            compared = f"{self.bound} {level} {sided} {self.interval_method} bound"
        return f"{self.metric}: {compared} {self.comparison} {self.threshold:g}"


class GateResult(BaseModel):
    """The outcome of one gate against this run's figures."""

    model_config = documented(extra="forbid", frozen=True)

    spec: GateSpec
    """The gate as declared."""

    status: GateStatus
    """`passed`, `failed`, or `not_evaluable` (never a pass)."""

    value: float | None
    """The compared value (estimate or bound); `None` when not evaluable."""

    reason: str
    """Why it passed, failed or could not be evaluated, in words."""

    subject: str | None = None
    """The configuration (candidate) the gate was evaluated for; `None` when evaluated on a bare
    list of figures."""

    compared: str = ""
    """Which value was compared, in words (`estimate`, or e.g. `upper bound of the one-sided
    0.95 clopper_pearson interval`); empty when no figure could be read."""

    figure_estimate: float | None = None
    """The figure's point estimate, shown beside the compared bound so a reader sees both."""

    figure_unit: str | None = None
    """The unit the figure was computed in (`trial`, `case`, `group`); `None` when absent."""

    @property
    def blocks(self) -> bool:
        """Whether this result holds release back: a blocking gate that did not pass.

        The one rule every release decision reads (verdicts, banner, exit code): an
        informational gate (`blocking = false`) never blocks, failed or unreadable.
        """
        return self.spec.blocking and self.status != "passed"

    def console_line(self) -> str:
        """The result as the CLI prints it, e.g. `gate FAILED (informational): name: reason`."""
        kind = "" if self.spec.blocking else " (informational)"
        return f"gate {self.status.upper()}{kind}: {self.spec.label}: {self.reason}"


def _compared_value(spec: GateSpec, figure: Figure) -> tuple[float | None, str]:
    """The value the gate compares, or `None` with the reason it is unavailable."""
    if figure.status == "not_run":
        return None, f"metric {spec.metric!r} was not run ({figure.reason or 'no reason given'})"
    if figure.status == "not_applicable":
        return None, (
            f"metric {spec.metric!r} is not applicable ({figure.reason or 'denominator is 0'})"
        )
    if figure.status == "not_evaluable":
        return None, f"metric {spec.metric!r} is not evaluable ({figure.reason})"
    if spec.unit is not None and figure.unit != spec.unit:
        return None, f"metric {spec.metric!r} is per {figure.unit}, the gate declares {spec.unit}"
    if spec.bound == "estimate":
        return figure.estimate, "estimate"
    assert spec.interval_method is not None and spec.confidence is not None  # validator
    sidedness = "two_sided" if spec.sidedness == "two_sided" else spec.bound
    interval = figure.interval(spec.interval_method, spec.confidence, sidedness)
    wanted = (
        f"{spec.sidedness.replace('_', '-')} {spec.confidence:g} {spec.interval_method} interval"
    )
    if interval is None:
        return None, f"metric {spec.metric!r} has no {wanted}"
    if interval.not_computable:
        return None, f"metric {spec.metric!r}: {wanted} not computable ({interval.not_computable})"
    value = interval.upper if spec.bound == "upper" else interval.lower
    if value is None:
        return None, f"metric {spec.metric!r}: {wanted} is unbounded on the {spec.bound} side"
    return value, f"{spec.bound} bound of the {wanted}"


def _counted(figure: Figure) -> str:
    """The figure's counts and unit, so the printed gate line says what it was computed over.

    E.g. ` (figure 43/80 per case)`: a per-case and a per-trial rate of one name read alike
    otherwise. Empty for a figure without counts.
    """
    if figure.numerator is None or figure.denominator is None:
        return ""
    return f" (figure {figure.numerator:g}/{figure.denominator:g} per {figure.unit})"


def evaluate_gate(spec: GateSpec, figures: Sequence[Figure]) -> GateResult:
    """Evaluate one gate against the run's figures (see `evaluate_gates`)."""
    matching = [figure for figure in figures if figure.name == spec.metric]
    if not matching:
        return GateResult(
            spec=spec,
            status="not_evaluable",
            value=None,
            reason=f"metric {spec.metric!r} was not computed in this run",
        )
    if len(matching) > 1:
        return GateResult(
            spec=spec,
            status="not_evaluable",
            value=None,
            reason=f"metric {spec.metric!r} appears {len(matching)} times; a gate needs one",
        )
    figure = matching[0]
    value, what = _compared_value(spec, figure)
    # The figure's own estimate and unit travel with the result so the record and the page show
    # the gate's whole configuration (what was compared against what), not only the verdict.
    seen = {"figure_estimate": figure.estimate, "figure_unit": figure.unit}
    if value is None:
        return GateResult(spec=spec, status="not_evaluable", value=None, reason=what, **seen)
    passed = _COMPARE[spec.comparison](value, spec.threshold)
    relation = spec.comparison if passed else f"not {spec.comparison}"
    return GateResult(
        spec=spec,
        status="passed" if passed else "failed",
        value=value,
        reason=f"{what} = {value:.6g}, {relation} {spec.threshold:g}{_counted(figure)}",
        compared=what,
        **seen,
    )


def evaluate_gates(specs: Sequence[GateSpec], figures: Sequence[Figure]) -> list[GateResult]:
    """Evaluate every declared gate, in declaration order.

    Comparisons are exact floating-point comparisons of the stored value with the threshold.

    Args:
        specs: Gates as frozen in the manifest.
        figures: The run's figures (matched by `Figure.name`).

    Returns:
        One `GateResult` per spec.
    """
    return [evaluate_gate(spec, figures) for spec in specs]


def any_failed(results: Sequence[GateResult], *, count_not_evaluable: bool = True) -> bool:
    """Whether the gates block release: the report command exits 1 when this is true.

    Args:
        results: Gate results.
        count_not_evaluable: Treat a gate that could not be evaluated (metric not run, interval
            missing) as blocking. On by default: a declared gate is a precondition, and an
            unrun check must not read as a passed one.

    Returns:
        True if any blocking gate failed (or, by default, could not be evaluated); an
        informational gate (`blocking = false`) never counts.
    """
    return any(
        result.blocks and (count_not_evaluable or result.status == "failed") for result in results
    )


__all__ = [
    "Comparison",
    "GateBound",
    "GateResult",
    "GateSpec",
    "GateStatus",
    "any_failed",
    "evaluate_gate",
    "evaluate_gates",
]
