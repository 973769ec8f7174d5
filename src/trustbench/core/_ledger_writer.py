"""The ledger's writer thread: SQLite commits and head anchors off the runner's event loop.

A commit (one WAL transaction per finished trial or attempt) blocks for the disk write; on the
event loop it stalls every in-flight trial for that long. `Ledger.start_writer` hands commits
to this single thread, which runs them strictly in submission order, so the chain, the
one-transaction-per-trial rule and the head anchor (written after the rows it names are
committed) are unchanged. A process killed with jobs still queued loses only rows that were not
yet committed, as if it had been killed a moment earlier; resuming treats them as never run.

Fail-stop: after a job fails, later jobs are dropped (a later row must never be committed after
an earlier one was lost) and the error is raised by the next `submit`, `drain` or `close`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable


class CommitThread:
    """One thread running submitted jobs in order; errors surface in the submitting thread."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[Callable[[], object] | None] = queue.Queue()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="ledger-writer", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], object]) -> None:
        """Queue `job` after every job submitted before it.

        Raises:
            BaseException: the error of an earlier job that failed.
        """
        self._raise_failure()
        self._jobs.put(job)

    def drain(self) -> None:
        """Wait until every submitted job has run; raise the first failure if there was one."""
        self._jobs.join()
        self._raise_failure()

    def close(self) -> None:
        """Run what is queued, stop the thread, and raise the first failure if there was one."""
        self._jobs.put(None)
        self._thread.join()
        self._raise_failure()

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
