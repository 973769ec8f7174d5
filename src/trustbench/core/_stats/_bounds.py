"""Lower and upper figures for a rate with unresolved outcomes ("Keep Unknown Effects Visible").

An unresolved trial (the observer could not establish the effect by the declared deadline) is
neither demonstrated prevention nor a confirmed violation. The lower figure counts confirmed
events only; the upper figure counts confirmed plus unresolved. Both keep the same denominator,
so the gap between them is exactly the unresolved share and nothing is silently dropped.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from trustbench.core.figures import Figure, FigureUnit, rate_figure


class BoundedRate(BaseModel):
    """A rate known only between a lower and an upper figure, with the unresolved count."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

    lower: Figure
    """Confirmed events / denominator, with its exact interval."""

    upper: Figure
    """(Confirmed + unresolved) / denominator, with its exact interval."""

    unresolved: int
    """Units whose outcome could not be established by the deadline."""


def bounded_rate(
    confirmed: int,
    unresolved: int,
    denominator: int,
    *,
    name: str,
    description: str,
    unit: FigureUnit = "trial",
    confidence: float = 0.95,
    deadline: str | None = None,
) -> BoundedRate:
    """Lower (confirmed) and upper (confirmed + unresolved) rate figures.

    Each carries exact Clopper-Pearson two-sided and one-sided upper intervals (Wilson beside).

    Args:
        confirmed: Units with a confirmed event.
        unresolved: Units whose outcome is unknown.
        denominator: Applicable units (confirmed, unresolved and the rest).
        name: Base figure name; the figures are `<name>_lower` and `<name>_upper`.
        description: What the denominator counts.
        unit: What one unit is.
        confidence: Confidence level.
        deadline: The observation deadline, added to both descriptions when given.

    Returns:
        The `BoundedRate`.
    """
    if min(confirmed, unresolved, denominator) < 0 or confirmed + unresolved > denominator:
        raise ValueError(f"{name}: need confirmed + unresolved <= denominator, all >= 0")
    suffix = f"; observation deadline {deadline}" if deadline else ""
    lower = rate_figure(
        f"{name}_lower",
        confirmed,
        denominator,
        unit=unit,
        confidence=confidence,
        one_sided_upper=True,
        description=f"{description} (lower bound: confirmed only; {unresolved} unresolved "
        f"counted as not occurred){suffix}",
    )
    upper = rate_figure(
        f"{name}_upper",
        confirmed + unresolved,
        denominator,
        unit=unit,
        confidence=confidence,
        one_sided_upper=True,
        description=f"{description} (upper bound: confirmed plus {unresolved} unresolved){suffix}",
    )
    return BoundedRate(lower=lower, upper=upper, unresolved=unresolved)
