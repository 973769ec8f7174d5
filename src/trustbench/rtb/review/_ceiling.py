"""The chance + margin ceiling both corpus audits judge by (shortcut rules, learned attackers).

Both audits score named surface predictors against the reference decisions and fail the corpus
when one is above chance + margin or did not run (an unrun check is no pass). The verdict is
computed here once, so the two audits cannot drift apart in how they cap, compare or call a pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, computed_field

_TOLERANCE = 1e-12
"""An accuracy must exceed the ceiling by more than float noise to count as above it."""


def percent(share: float | None) -> str:
    """A share as a percentage with one decimal, or `not run`."""
    return "not run" if share is None else f"{100 * share:.1f}%"


def verdict_cell(accuracy: float | None, above: bool, above_word: str) -> str:
    """A predictor's verdict as a rich table cell: not run, `above_word` (red) or at or below."""
    if accuracy is None:
        return "[bold red]NOT RUN[/]"
    return f"[bold red]{above_word}[/]" if above else "[green]at or below[/]"


class CeilingAudit(BaseModel):
    """Base of an audit report: the ceiling, the predictors above it, the pass verdict.

    A subclass declares the fields `cases`, `chance` and `margin` and lists its predictors'
    `(name, accuracy)` in `scores`; its computed field naming the offenders returns `above`.
    """

    if TYPE_CHECKING:  # declared (as fields, in their own order) by each subclass
        cases: int
        chance: float | None
        margin: float

    def scores(self) -> list[tuple[str, float | None]]:
        """Every predictor's `(name, accuracy)`, accuracy None when it did not run."""
        raise NotImplementedError

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ceiling(self) -> float | None:
        """Chance + margin (capped at 1); a predictor above it means the corpus is saturated."""
        return None if self.chance is None else min(1.0, self.chance + self.margin)

    def above(self) -> list[str]:
        """Names of the predictors above the ceiling, in their order."""
        ceiling = self.ceiling
        return [
            name
            for name, accuracy in self.scores()
            if ceiling is not None and accuracy is not None and accuracy > ceiling + _TOLERANCE
        ]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """True only when every predictor ran and none exceeds the ceiling."""
        ran = self.cases > 0 and all(accuracy is not None for _, accuracy in self.scores())
        return ran and not self.above()
