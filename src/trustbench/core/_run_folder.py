"""The run folder's lock and the marking of executions an interrupted run left unfinished.

Kept apart from the scheduler (`_runner`): both are about the folder a run resumes in, not
about ordering or executing trials.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from trustbench.core._ledger import Ledger
from trustbench.errors import InputError


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
