"""One pass over a configuration's trials, counting everything its report reads.

`report` used to hold every configuration's trials as objects and walk them once per figure,
metric, breakdown and count. Here each trial is made (`ConfigurationTrials`), handed to every
tally once and dropped: the figures (`FigureTally`), the metrics (`MetricsTally`), the headline
figures per group and per variant, the valid-response counts, the failed trials' error classes
and the models the service reported. What is kept is per case, group or variant, and flat
arrays of latencies and costs.
"""

from __future__ import annotations

from trustbench.core import Evaluability
from trustbench.rtb.review._figures import FigureTally, headline
from trustbench.rtb.review._grading import (
    ConfigurationRow,
    count_error_classes,
    evaluability_kind,
)
from trustbench.rtb.review._metric_tally import MetricsTally
from trustbench.rtb.review._rates import Marks, MarksOf, review_rates
from trustbench.rtb.review._rows import ReviewTrialRow

BREAKDOWN_KEYS = ("group", "variant")
"""The breakdowns of the headline figures (`ReviewTrialRow` attributes)."""


class ConfigurationTally:
    """Every count of one configuration's report, fed one trial at a time."""

    def __init__(self, *, baseline: bool) -> None:
        self._rates = review_rates()
        self._marks = MarksOf(self._rates)
        self.figures = FigureTally(baseline=baseline, rates=self._rates)
        self.metrics = MetricsTally(self._rates)
        self.breakdowns: dict[str, dict[str, FigureTally]] = {key: {} for key in BREAKDOWN_KEYS}
        self._evaluability = [0, 0, 0, 0]
        self._errors: dict[str, int] = {}
        self.reported_models: set[str] = set()
        """Model ids the service reported in any member trial."""

    def add(self, item: ConfigurationRow) -> None:
        """Count one configuration trial."""
        row = item.row
        marks = self._marks(row)  # each rate asked once for all nine tallies
        self.figures.add(row, marks)
        self.metrics.add(row, marks)
        self._add_to_breakdowns(row, marks, 1)
        self._evaluability[evaluability_kind(item)] += 1
        count_error_classes(item, self._errors)
        self.reported_models.update(
            m.reported_model for m in item.members if m.reported_model is not None
        )

    def _add_to_breakdowns(self, row: ReviewTrialRow, marks: Marks, count: int) -> None:
        for key, parts in self.breakdowns.items():
            value = getattr(row, key)
            part = parts.get(value)
            if part is None:
                part = parts[value] = FigureTally(only=headline(), rates=self._rates)
            part.add(row, marks, count)

    @property
    def counts_alike_trials(self) -> bool:
        """Whether `add_alike` may count trials at once: no declared rate reads the index."""
        return self._marks.ignores_trial

    def add_alike(self, row: ReviewTrialRow, count: int) -> None:
        """Count `count` member-less trials equal to `row` but for their trial index.

        The unchecked baseline's K trials of a case are such trials (every one permits, with no
        finding, latency or cost): counted once with their number, not K times.

        Raises:
            ValueError: a declared rate reads the trial index, or `row` has member outcomes.
        """
        if not self.counts_alike_trials:
            raise ValueError("a declared rate reads the trial index: count trials one at a time")
        marks = self._marks(row)
        self.figures.add(row, marks, count)
        self.metrics.add(row, marks, count)
        self._add_to_breakdowns(row, marks, count)
        self._evaluability[0] += count  # no member gave an unusable reply (`evaluability_kind`)

    @property
    def trials(self) -> int:
        """Trials counted."""
        return self.figures.rows

    @property
    def evaluability(self) -> Evaluability:
        """Valid-response counts (each trial counted by `evaluability_kind`)."""
        return Evaluability(sum(self._evaluability), *self._evaluability)

    @property
    def error_classes(self) -> dict[str, int]:
        """Failed member trials by error class (`connection_error`, `timeout`, ...), sorted."""
        return dict(sorted(self._errors.items()))
