"""The ledger's writer thread: SQLite commits and head anchors off the runner's event loop.

A commit blocks for the disk write; on the event loop it stalls every in-flight trial for that
long. `Ledger.start_writer` hands commits to this single thread, which runs them strictly in
submission order, so the chain, the all-or-none rule for each appended group of rows and the
head anchor (written after the rows it names are committed) are unchanged.

Group commit: rows wait in one pending list, and the thread commits everything pending in one
transaction, `GROUP_WINDOW_S` after the first of them arrived. Each commit rewrites the pages
it touched (table tails and index pages) into the WAL, so fewer, larger commits cost less: in
the latency-bound bench the writer's CPU went from about 0.15 to 0.09 ms per trial with a 20 ms
window (about 300 commits down to 50 for 2,000 trials), and one commit per row had cost about
0.2 ms per trial. A group holds whole `append_many` calls, so each call's rows still survive or
vanish together. A process killed with rows still pending loses only rows that were not yet
committed (at most the last window's), as if it had been killed a moment earlier; resuming
treats their trials as never run.

Fail-stop: after a job fails, later jobs are dropped (a later row must never be committed after
an earlier one was lost) and the error is raised by the next `submit`, `drain` or `close`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trustbench.core._ledger_contents import Statement

Statements = list["Statement"]
"""SQL statements with their parameters, committed together."""

GROUP_WINDOW_S = 0.02
"""How long a group collects rows before it is committed (a killed run loses at most this)."""

MAX_PENDING = 4096
"""Statements that may wait for a commit; a submitter past this waits for the writer.

Back-pressure: without it, an event loop that makes rows faster than the thread commits them
(a fast in-process candidate, a slow disk) grows the pending list with the run, not with the
trials in flight (issue 30). Past this many the submitter waits (the GIL is free meanwhile)
until a commit takes them."""


class CommitThread:
    """One thread running submitted jobs in order; errors surface in the submitting thread.

    Args:
        commit: Commits a list of statements in one transaction (called on this thread).
    """

    def __init__(self, commit: Callable[[Statements], None]) -> None:
        self._commit = commit
        self._jobs: queue.Queue[Callable[[], object] | None] = queue.Queue()
        self._failure: BaseException | None = None
        self._pending: Statements = []
        self._flush_queued = False
        self._hurry = threading.Event()
        """Set while someone waits for the queue (drain, close): a group is committed at once."""
        self._lock = threading.Lock()
        self._taken = threading.Condition(self._lock)
        """Notified when a flush takes the pending statements (see `MAX_PENDING`)."""
        self._thread = threading.Thread(target=self._work, name="ledger-writer", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], object]) -> None:
        """Queue `job` after every job and every statement submitted before it.

        Raises:
            BaseException: the error of an earlier job that failed.
        """
        self._raise_failure()
        self._jobs.put(job)

    def submit_statements(self, statements: Statements) -> None:
        """Queue rows for the next group commit (after everything submitted before them).

        Raises:
            BaseException: the error of an earlier job that failed.
        """
        self._raise_failure()
        with self._lock:
            while len(self._pending) >= MAX_PENDING and self._flush_queued:
                if self._failure is not None or not self._thread.is_alive():
                    break  # nothing will take them: the failure is raised on the next call
                self._taken.wait(0.1)
            self._pending += statements
            if self._flush_queued:
                return  # a queued flush, ahead of any job submitted later, will take them
            self._flush_queued = True
        self._jobs.put(self._flush)

    def drain(self) -> None:
        """Wait until every submitted job has run; raise the first failure if there was one."""
        self._hurry.set()
        try:
            self._jobs.join()
        finally:
            self._hurry.clear()
        self._raise_failure()

    def close(self) -> None:
        """Run what is queued, stop the thread, and raise the first failure if there was one."""
        self._hurry.set()
        self._jobs.put(None)
        self._thread.join()
        self._raise_failure()

    def _flush(self) -> None:
        # Let the group grow (the GIL is free meanwhile), unless someone is waiting for it: the
        # end of a run waited out a whole window before its last commit.
        self._hurry.wait(GROUP_WINDOW_S)
        with self._lock:
            statements, self._pending = self._pending, []
            self._flush_queued = False
            self._taken.notify_all()
        if statements:
            self._commit(statements)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                if self._failure is None:
                    job()
            except BaseException as error:
                self._failure = error
            finally:
                self._jobs.task_done()
