"""Verify a large run's ledger in a second process while `report` grades it.

At a million trials, re-hashing the chain and every stored body (`verify_run`) takes about as
long as grading, each on one core, and neither needs the other's results until the end: `report`
needs the verdict only before it writes anything. So for a ledger of `BESIDE_FROM_BYTES` or more,
on a machine with a second core, `verify_run` runs in a spawned process beside the grading.
What `report` decides is unchanged: nothing is written until the verification has answered, a
run it finds altered is refused with the same message, and an error the grading hits on an
altered ledger is reported as the alteration, never as a crash.

Below the threshold (every small run, the tests) verification runs first, in this process: a
spawned interpreter costs about half a second, more than verifying a small ledger.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from trustbench.core._ledger import LEDGER_FILE
from trustbench.core._manifest import Manifest
from trustbench.core._verify import VerifyReport, input_problems, verify_ledger

if TYPE_CHECKING:  # multiprocessing loads only for a ledger verified beside (not on import)
    from multiprocessing.pool import AsyncResult, Pool

BESIDE_FROM_BYTES = 64 << 20
"""Ledgers this large (about 20,000 review trials) are verified beside the grading."""


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def verifies_beside(run_dir: Path) -> bool:
    """True when `run_dir`'s ledger is large enough, and a second core free, to verify beside."""
    try:
        size = (run_dir / LEDGER_FILE).stat().st_size
    except OSError:
        return False  # verify_run names the missing ledger
    return size >= BESIDE_FROM_BYTES and _cores() > 1


class Verification:
    """`verify_run(run_dir)` for a manifest read before, its ledger part in-process or beside.

    Beside, only `verify_ledger` runs in the second process: it reads the run folder alone. The
    frozen inputs are checked here, through this process's track registry (a track registered
    in code is unknown to a spawned interpreter). Use as a context manager: leaving it stops
    the second process, whatever happened.
    """

    def __init__(self, run_dir: Path, manifest: Manifest, *, beside: bool | None = None) -> None:
        self.beside = verifies_beside(run_dir) if beside is None else beside
        self._manifest = manifest
        self._pool: Pool | None = None
        self._pending: AsyncResult[VerifyReport] | None = None
        self._report: VerifyReport | None = None
        arguments = (run_dir, manifest.manifest_sha256, manifest.plan.trials)
        if self.beside:
            import multiprocessing

            # spawn, not fork: a forked child would share this process's open SQLite handles
            # and locks, which SQLite forbids across a fork.
            self._pool = multiprocessing.get_context("spawn").Pool(1)
            self._pending = self._pool.apply_async(verify_ledger, arguments)
        else:
            self._report = self._with_inputs(verify_ledger(*arguments))

    def _with_inputs(self, report: VerifyReport) -> VerifyReport:
        report.problems += input_problems(self._manifest)
        return report

    def result(self) -> VerifyReport:
        """The verification's report, as `verify_run`'s (waits for the second process).

        Raises:
            TrustbenchError: what `verify_ledger` raised (a missing ledger, a file that is no
                ledger), in whichever process it ran.
        """
        if self._report is None:
            assert self._pending is not None
            self._report = self._with_inputs(self._pending.get())
        return self._report

    def __enter__(self) -> Verification:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._pool is None:
            return
        if error is None and self._report is not None:
            self._pool.close()  # its one task is done: let the worker exit
        else:
            self._pool.terminate()  # an error or an interrupt: stop the verification now
        self._pool.join()
        self._pool = None
