"""Adapters for the isolation tests: they try to read what the harness hides (one thing each)."""

from __future__ import annotations

import math
import os
from pathlib import Path

from trustbench.trb.adapter import SelfReport, StepContext
from trustbench.trb.instruments import GovernedOracle


class OpensTheSecret(GovernedOracle):
    """A governed oracle whose emit_r first reads the file named in `TRB_TEST_SECRET_PATH`."""

    def emit_r(self, context: StepContext) -> SelfReport:
        Path(os.environ["TRB_TEST_SECRET_PATH"]).read_text()
        return super().emit_r(context)


class SeesTraceIds(GovernedOracle):
    """A governed oracle that withholds its attribution wherever the trace id names a split."""

    def emit_r(self, context: StepContext) -> SelfReport:
        report = super().emit_r(context)
        leak = any(word in context.trace_id for word in ("eval", "transfer", "train"))
        return report.model_copy(update={"caused_by_self": None}) if leak else report


def opens_the_secret() -> OpensTheSecret:
    return OpensTheSecret()


def sees_trace_ids() -> SeesTraceIds:
    return SeesTraceIds()


class DiesOnItsSecondReport(GovernedOracle):
    """A governed oracle whose worker process exits in the middle of its second `emit_r`."""

    reports = 0

    def emit_r(self, context: StepContext) -> SelfReport:
        DiesOnItsSecondReport.reports += 1
        if DiesOnItsSecondReport.reports == 2:
            os._exit(3)
        return super().emit_r(context)


def dies_on_its_second_report() -> DiesOnItsSecondReport:
    return DiesOnItsSecondReport()


class ScoresText(GovernedOracle):
    """A governed oracle offering log-probabilities of text: 0.6 on its r's plan, else 0.2."""

    def continuation_logprob(
        self, context: StepContext, r_override: SelfReport | None, continuation: str
    ) -> float:
        r = r_override or self.emit_r(context)
        return math.log(0.6 if continuation == r.planned_next else 0.2)


def scores_text() -> ScoresText:
    return ScoresText()


def governed() -> GovernedOracle:
    return GovernedOracle()
