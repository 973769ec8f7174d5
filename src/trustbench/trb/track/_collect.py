"""Trial accounting for the TRB report: ledger trials -> measure rows per candidate and split.

A completed, applicable trial contributes its measures' counts; a failed trial contributes each
measure's worst case (it stays in every denominator); a not-applicable trial is listed, not
scored; an unrun trial contributes nothing (its trace is simply absent).

For evaluability a completed trial is a valid response unless its adapter never answered: no
output was usable and some call never reached the model (`RecordingAdapter.responses`), as
when a chat model's service is down. Such a trial is scored like any other (its items worst
case) but counts as `transport_failed`, so a candidate that never answered is not evaluable,
whatever its figures say. An answer that is there but unusable (a report in the wrong
encoding, a malformed distribution) is TRB's measured failure, scored worst case, not missing.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from trustbench.core import Evaluability, LedgerContents
from trustbench.trb.corpus._format import Trace
from trustbench.trb.track._measures import MeasureRow, TrbMeasure


class Collected:
    """Trial rows grouped by candidate, split and measure, with trial accounting."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str], list[MeasureRow]] = defaultdict(list)
        self.adapters: dict[str, str] = {}
        self.tiers: dict[str, str] = {}
        self.isolation: dict[str, str] = {}
        """Candidate -> where its adapter ran (the worker's sandbox mode, or in-process)."""
        self.failed: dict[str, int] = defaultdict(int)
        self.not_applicable: dict[str, list[str]] = defaultdict(list)
        self.why_not_applicable: dict[tuple[str, str], list[str]] = defaultdict(list)
        """(candidate, split) -> the reason each not-applicable trial gave (no trace ids)."""
        self.attempted: dict[str, int] = defaultdict(int)
        self.unanswered: dict[str, int] = defaultdict(int)
        """Completed trials with no usable adapter output, some call never answered."""

    def not_run_reason(self, candidate: str, split: str) -> str:
        """Why a candidate has no scored trial on a split (the figure's "not run" reason).

        "not applicable: <reason>" when its trials there said so (the first distinct reason,
        and how many others there were); otherwise none of them finished.
        """
        reasons = list(dict.fromkeys(self.why_not_applicable.get((candidate, split), [])))
        if not reasons:
            return f"no finished, applicable trial of {candidate} on {split}"
        more = f" (and {len(reasons) - 1} other reason(s))" if len(reasons) > 1 else ""
        return f"not applicable: {reasons[0]}{more}"

    def evaluability(self) -> dict[str, Evaluability]:
        """Per candidate: finished trials, and the failed ones (no usable adapter output).

        A not-applicable trial is a valid answer (the adapter ran and said so); a failed one is
        counted as `transport_failed` (the adapter or its service never produced an output).
        """
        return {
            candidate: Evaluability(
                attempted=attempted,
                valid=attempted - self.failed.get(candidate, 0) - self.unanswered.get(candidate, 0),
                transport_failed=self.failed.get(candidate, 0) + self.unanswered.get(candidate, 0),
            )
            for candidate, attempted in self.attempted.items()
        }

    def oracles(self) -> frozenset[str]:
        """Oracle candidates: instruments with closed-form answers, not release candidates."""
        return frozenset(c for c, a in self.adapters.items() if a.startswith("oracle:"))


def _never_answered(failed: bool, responses: Any) -> bool:
    """A completed trial with no usable adapter output, some call never reaching the model."""
    return (
        not failed
        and isinstance(responses, dict)
        and responses.get("asked", 0) > 0
        and responses.get("usable") == 0
        and responses.get("transport_failed", 0) > 0
    )


def add_trial(
    out: Collected,
    measures: list[TrbMeasure],
    candidate: str,
    trace: Trace,
    *,
    failed: bool,
    outcome: dict[str, Any],
    trial_index: int = 0,
) -> None:
    """Add one trial (from a ledger, or measured in this process by the library) to `out`."""
    if outcome.get("adapter"):
        out.adapters[candidate] = outcome["adapter"]
    if outcome.get("adapter_tier"):
        out.tiers[candidate] = outcome["adapter_tier"]
    if outcome.get("isolation"):
        out.isolation[candidate] = outcome["isolation"]
    out.attempted[candidate] += 1
    if not failed and not outcome.get("applicable", False):
        reason = outcome.get("reason", "not applicable")
        out.not_applicable[candidate].append(f"{trace.trace_id}: {reason}")
        out.why_not_applicable[(candidate, trace.split)].append(reason)
        return
    out.failed[candidate] += failed
    responses = outcome.get("responses")  # absent in ledgers written before it was kept
    if _never_answered(failed, responses):
        out.unanswered[candidate] += 1
    for measure in measures:
        if getattr(measure, "derived", False):
            continue
        counts = None if failed else outcome.get("measures", {}).get(measure.key)
        out.rows[(candidate, trace.split, measure.key)].append(
            MeasureRow(
                trace=trace,
                trial_index=trial_index,
                counts=measure.failed(trace) if counts is None else counts,
                failed=counts is None,
            )
        )


def collect_trials(
    ledger: LedgerContents, cases: dict[str, Trace], measures: list[TrbMeasure]
) -> Collected:
    """Group finished trials into measure rows per (candidate, split, measure).

    Raises:
        CheckFailed: a trial names a trace outside the frozen plan.
    """
    out = Collected()
    for trial, trace in ledger.trials_in_plan(cases, "trace"):
        add_trial(
            out, measures, trial["candidate"], trace,
            failed=trial["status"] != "completed", outcome=trial["outcome"] or {},
            trial_index=trial["trial_index"],
        )  # fmt: skip
    return out
