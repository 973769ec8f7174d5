"""The run folder's lock and what a resume does with trials an earlier run left unfinished.

Executions an interrupted run left mid-trial are marked abandoned; finished trials cut off the
ledger's end are refused, named, or re-run as a recorded decision (`run --rerun-cut`).

Kept apart from the scheduler (`_runner`): both are about the folder a run resumes in, not
about ordering or executing trials.
"""

from __future__ import annotations

import fcntl
import os
from array import array
from collections.abc import Sequence
from pathlib import Path

from trustbench.core._track import TrialKey
from trustbench.core.ledger._head import CutTail
from trustbench.core.ledger._store import Ledger
from trustbench.core.spec._manifest import sorted_ids_sha256
from trustbench.errors import CheckFailed, InputError


class RunLock:
    """An exclusive lock on the run folder; the OS drops it if the process dies."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / ".run.lock"
        self._fd: int | None = None

    def __enter__(self) -> RunLock:
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise InputError(
                "another `trustbench run` is using this folder", location=str(self.path)
            ) from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)


def holds_the_whole_plan(ledger: Ledger, planned: int, keys_sha256: str) -> bool:
    """Whether the ledger's finished trials are exactly the plan's: every planned trial, no other.

    Compared with the digest the manifest records of the planned ids (`PlanRecord.keys_sha256`,
    over the sorted ids), streamed from the ledger's index: a finished 200,000-trial folder is
    recognised in about 0.1 s, where ordering the plan and looking each id up took about 1 s.
    """
    if ledger.finished_trial_count() != planned:
        return False
    return sorted_ids_sha256(ledger.finished_trial_ids_sorted()) == keys_sha256


def mark_abandoned(ledger: Ledger) -> tuple[dict[str, int], int]:
    """Mark unfinished executions abandoned; return the next execution number per trial."""
    next_execution: dict[str, int] = {}
    marked = ledger.abandoned_marked()
    count = 0
    for trial_id, executions in ledger.unfinished_executions().items():
        for execution, attempt_ids in executions:
            if (trial_id, execution) not in marked:
                ledger.event(
                    "execution_abandoned",
                    {"trial_id": trial_id, "execution": execution, "attempt_ids": attempt_ids},
                )
                count += 1
        next_execution[trial_id] = max(execution for execution, _ in executions) + 1
    return next_execution, count


NAMED = 5
"""Cut trials a refusal names (then their count)."""


def _refuse_or_record_cut(
    ledger: Ledger,
    cut: CutTail,
    order: Sequence[TrialKey],
    remaining: Sequence[int],
    *,
    rerun_cut: bool,
) -> None:
    """Refuse to re-run trials cut off the ledger's end, naming them; or record the decision.

    Which of the trials without a row were cut, and which never ran, the ledger no longer
    says; the runner hands trials out in the seeded order, so the cut ones are the first of
    them in that order (all of them, for a run that had finished). With `rerun_cut` the
    decision is an event in the chain (`cut_trials_rerun`, the number re-run: the head's count
    beyond the ledger's, or every trial without a row when the head kept no count), which
    `verify` totals and the record reports as `trials_rerun_after_cut`.

    Raises:
        CheckFailed: without `rerun_cut`, before anything is written.
    """
    count = len(remaining) if cut.trials is None else min(cut.trials, len(remaining))
    first = [order[position].trial_id for position in remaining[: min(count, NAMED)]]
    if not rerun_cut:
        named = f"{', '.join(first)}{' …' if count > len(first) else ''}"
        which = (
            f"which of the {len(remaining)} planned trials without a row were cut is unknown "
            f"(first in seeded order: {named})"
            if cut.trials is None
            else f"the {count} cut trials are (first in seeded order): {named}"
            if count
            else "no finished trial was among the rows cut"
        )
        raise CheckFailed(
            f"refusing to resume: {cut.problem}; {which}; `trustbench run --rerun-cut` re-runs "
            "them, recorded as a re-run after a cut (or restore the ledger from a copy)",
            location="ledger.sqlite",
        )
    ledger.event("cut_trials_rerun", {"rerun": count, "first": first, "problem": cut.problem})
    ledger.anchor(force=True)  # the head now counts what the ledger holds: decided once


def remaining_positions(
    ledger: Ledger, order: Sequence[TrialKey], finished: set[str], *, rerun_cut: bool
) -> Sequence[int]:
    """The order's positions without a finished trial; a cut tail refused or its re-run recorded.

    Nothing is written before a refusal (`_refuse_or_record_cut`).
    """
    remaining: Sequence[int] = (
        array("I", (p for p, key in enumerate(order) if key.trial_id not in finished))
        if finished
        else range(len(order))
    )
    if ledger.cut is not None:
        _refuse_or_record_cut(ledger, ledger.cut, order, remaining, rerun_cut=rerun_cut)
    return remaining
