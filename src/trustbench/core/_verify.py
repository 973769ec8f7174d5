"""`verify`: recompute the manifest hash, the ledger chain and head, and the frozen inputs."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from trustbench.core._second_process import SecondProcess, StartMethod
from trustbench.core._track import Track, load_track
from trustbench.core.ledger._store import (
    LEDGER_FILE,
    NOT_A_LEDGER,
    TABLE_COLUMNS,
    UNREADABLE,
    ends_signed_off,
    ledger_problems,
    open_for_reading,
)
from trustbench.core.spec._manifest import Manifest, check_inputs, read_manifest
from trustbench.errors import TrustbenchError

# ------------------------------------------------------------------------------------------------
# Tell the kernel a large ledger is about to be read whole, so it reads it ahead.
#
# `report` and `verify` read every page of a ledger, but SQLite asks for them 4 KiB at a time
# and in b-tree order, which on a ledger the page cache does not hold (a new machine, a reboot,
# a run that finished hours ago) is a stream of small random reads: a 3.3 GB, 1,000,000-trial
# ledger took 113 to 121 s to report cold against 75 s warm on a 2-core machine whose disk reads
# 1.6 GB/s in sequence. Advising the kernel that the whole file will be needed
# (`posix_fadvise(POSIX_FADV_WILLNEED)`) makes it read the file ahead in large sequential
# requests while the reading starts.
#
# The kernel takes at most a few MiB of readahead per call, so the file is advised in steps of
# `STEP_BYTES`. That loop costs about half a second of system time for 3 GB, so it runs in a
# daemon thread (the call releases the GIL) and the caller does not wait for it. A file larger
# than half the memory the machine has free is not advised: reading it whole into the cache
# would evict other pages and then itself. Where the call does not exist (not Linux or another
# POSIX system) nothing is done: the advice changes how fast pages arrive, never what is read.

FROM_BYTES = 64 << 20
"""Files smaller than this are not advised: a small ledger is read faster than advised."""
STEP_BYTES = 8 << 20
"""Bytes advised per call (the kernel caps one call's readahead at about this)."""


def _free_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def worth_prefetching(size: int, free_bytes: int | None) -> bool:
    """Whether a file of `size` bytes should be read ahead with `free_bytes` of memory free."""
    return size >= FROM_BYTES and free_bytes is not None and size <= free_bytes // 2


def _advise(path: Path) -> None:
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return  # the reader itself names a missing or unreadable file
    try:
        size = os.fstat(descriptor).st_size
        for offset in range(0, size, STEP_BYTES):
            os.posix_fadvise(descriptor, offset, STEP_BYTES, os.POSIX_FADV_WILLNEED)
    except OSError:
        return  # advice only: a file system that refuses it is read as before
    finally:
        os.close(descriptor)


def prefetch(*paths: Path) -> threading.Thread | None:
    """Start reading `paths` ahead in a daemon thread, for those worth it; return the thread.

    Returns None when nothing is advised (small files, too little free memory, no
    `posix_fadvise`). Callers need not wait for the thread: it only warms the page cache.
    """
    if not hasattr(os, "posix_fadvise"):
        return None
    free = _free_memory_bytes()
    chosen = [p for p in paths if p.is_file() and worth_prefetching(p.stat().st_size, free)]
    if not chosen:
        return None

    def advise_each() -> None:
        for path in chosen:
            _advise(path)

    thread = threading.Thread(target=advise_each, name="trustbench-prefetch", daemon=True)
    thread.start()
    return thread


def prefetch_ledger(run_dir: Path) -> threading.Thread | None:
    """`prefetch` of a run folder's ledger and its write-ahead log (see the module docstring)."""
    return prefetch(run_dir / LEDGER_FILE, run_dir / f"{LEDGER_FILE}-wal")


@dataclass
class VerifyReport:
    """Outcome of verifying one run folder."""

    manifest_sha256: str
    """The manifest hash (recomputed and matching the recorded one)."""
    rows: int = 0
    """Ledger rows checked."""
    finished_trials: int = 0
    """Trials with a finished row."""
    planned_trials: int = 0
    """Trials in the frozen plan."""
    problems: list[str] = field(default_factory=list)
    """Integrity problems, the first altered or missing row first. Empty means intact."""
    trials_rerun_after_cut: int = 0
    """Trials run again after finished trials were found cut off the ledger's end: the total
    of the `cut_trials_rerun` events `run --rerun-cut` recorded."""

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems

    @property
    def interrupted(self) -> bool:
        """True when the ledger does not end signed off (`INTERRUPTED`): a resumable run."""
        return INTERRUPTED in self.problems

    @property
    def alterations(self) -> list[str]:
        """The integrity failures: every problem but `INTERRUPTED` (refuse to report on these)."""
        return [problem for problem in self.problems if problem != INTERRUPTED]


def verify_run(run_dir: Path) -> VerifyReport:
    """Verify a run folder: manifest, ledger chain and file, recorded heads, sign-offs, inputs.

    The chain proves no row was altered, removed or reordered; `ledger.head` (see
    `core.ledger._head`) catches rows cut off the end and a chain re-hashed after an edit; each
    `run_finished` sign-off must match the trials before it; the corpus and prompt files are
    re-hashed against the manifest; SQLite's `integrity_check` and the schema
    (`core.ledger._store`) cover what no query of the chain reads; the head a written
    `record.intoto.json` states must still be in the ledger (`core.ledger._head`). A ledger of an
    interrupted run (intact, but not ending with a sign-off) fails too, and says so: resume it
    with `trustbench run`.

    Raises:
        CheckFailed: when the manifest was changed (raised by `read_manifest`) or the ledger file
            is empty or not a SQLite database.
        InputError: when the folder has no manifest or ledger.
    """
    manifest = read_manifest(run_dir)
    prefetch_ledger(run_dir)  # every page is read: let the kernel read the file ahead
    report = verify_ledger(run_dir, manifest.manifest_sha256, manifest.plan.trials)
    report.problems += input_problems(manifest)
    return report


def verify_ledger(run_dir: Path, manifest_sha256: str, planned_trials: int) -> VerifyReport:
    """The ledger's part of `verify_run` (all but the frozen inputs) for a manifest read before.

    It reads only the run folder's files, never the registries of this process, so it can run
    in a second process (`core/_verify.py`).
    """
    report = VerifyReport(manifest_sha256, planned_trials=planned_trials)
    connection = open_for_reading(run_dir)
    try:
        report.problems = ledger_problems(connection, run_dir, manifest_sha256)
        report.rows = sum(
            connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in TABLE_COLUMNS
        )
        report.finished_trials = connection.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
        report.trials_rerun_after_cut = _rerun_after_cut(connection)
        if not report.problems and not ends_signed_off(connection):
            report.problems.append(INTERRUPTED)
    except UNREADABLE as error:
        report.problems.insert(0, f"{NOT_A_LEDGER}: {error}")
    finally:
        connection.close()
    return report


INTERRUPTED = (
    "the ledger does not end with a run_finished event: the run was interrupted "
    "(resume it with `trustbench run`)"
)
"""The one verify problem that is not an integrity failure: `report` still reports such a run,
marked incomplete."""


def _rerun_after_cut(connection: sqlite3.Connection) -> int:
    """The trials `run --rerun-cut` decided to run again, over all its recorded decisions."""
    return sum(
        int(json.loads(data).get("rerun", 0))
        for (data,) in connection.execute("SELECT data FROM events WHERE kind = 'cut_trials_rerun'")
    )


def input_problems(manifest: Manifest) -> list[str]:
    """Re-hash the corpus, prompts and every other frozen input against the manifest."""
    return checked_track(manifest)[1]


def checked_track(manifest: Manifest) -> tuple[Track | None, list[str]]:
    """`input_problems`, with the track that found the frozen inputs intact (None if not).

    That track holds the inputs it hashed (a corpus, parsed from the hashed bytes), so `report`
    grades from it: loading them again would read and parse the same files a second time.
    """
    try:
        track, _ = load_track(manifest.spec.track_id)
        check_inputs(manifest, track)
    except TrustbenchError as error:
        return None, [f"frozen inputs: {error}"]
    return track, []


# ------------------------------------------------------------------------------------------------
# Verify a run's ledger in a second process while `report` grades it.
#
# Re-hashing the chain and every stored body (`verify_ledger`) and grading each take one core,
# and neither needs the other's results until the end: `report` needs the verdict only before it
# writes anything. So on a machine with a second core the ledger is verified in a second process
# (`core/_second_process.py`) beside the grading. What `report` decides is unchanged: nothing is
# written until the verification has answered, a run it finds altered is refused with the same
# message, and an error the grading hits on an altered ledger is reported as the alteration,
# never as a crash.
#
# The second process is forked where that is safe (`forks_safely`: on Linux, while this process
# runs one thread and holds none of the run's ledger files open). A fork costs about 4 ms, so
# there every ledger is verified beside (bench/README, "Sixth pass"). Where a fork is not safe, a
# ledger of `BESIDE_FROM_BYTES` or more is verified in a spawned interpreter (about half a second
# to start, small beside a large ledger's verification), and a smaller one first, in this
# process.

BESIDE_FROM_BYTES = 64 << 20
"""Ledgers this large (about 20,000 review trials) are verified beside even where only a spawned
interpreter can do it."""

_LEDGER_FILES = (LEDGER_FILE, f"{LEDGER_FILE}-wal", f"{LEDGER_FILE}-shm", f"{LEDGER_FILE}-journal")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _holds_ledger_open(run_dir: Path) -> bool:
    """True when a file descriptor of this process refers to one of the run's ledger files."""
    ledger_files = {str((run_dir / name).resolve()) for name in _LEDGER_FILES}
    try:
        descriptors = os.listdir("/proc/self/fd")
    except OSError:
        return True  # cannot tell: assume it does
    for descriptor in descriptors:
        try:
            if os.readlink(f"/proc/self/fd/{descriptor}") in ledger_files:
                return True
        except OSError:
            continue  # the descriptor of the listing itself, closed since
    return False


def forks_safely(run_dir: Path) -> bool:
    """True when a forked child may verify `run_dir`'s ledger: Linux, one thread, ledger closed.

    A forked child holds a copy of every lock and handle of this process at the fork. SQLite
    forbids using a connection across a fork, and its record of the locks it holds per file would
    be the parent's in the child; a lock another thread held at the fork would never be released
    in the child. So a fork is taken only while this process runs one thread (`_threads`) and
    no descriptor of it refers to the run's ledger files. The child only reads: it opens its own
    read-only connection, and its garbage collector stays off (`core/_second_process.py`).
    """
    return sys.platform.startswith("linux") and _threads() == 1 and not _holds_ledger_open(run_dir)


def _threads() -> int:
    """The threads of this process, as the kernel counts them (`/proc/self/task`).

    `threading.active_count()` misses threads started without `threading` (`_thread`, C
    libraries): pytest-xdist's workers run one such thread.
    """
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 2  # cannot tell: assume another thread runs


def beside_start(run_dir: Path) -> StartMethod | None:
    """How the process verifying `run_dir`'s ledger beside is started; None: verify it here.

    One core: here. A fork where it is safe, whatever the ledger's size; a spawned interpreter
    for a large ledger where it is not; here otherwise (see the comment above).
    """
    if _cores() < 2:
        return None
    if forks_safely(run_dir):
        return "fork"
    try:
        size = (run_dir / LEDGER_FILE).stat().st_size
    except OSError:
        return None  # verify_ledger names the missing ledger
    return "spawn" if size >= BESIDE_FROM_BYTES else None


def second_process_for(run_dir: Path) -> SecondProcess | nullcontext[None]:
    """The second process to verify `run_dir`'s ledger in (`beside_start`), as a context.

    Entered, it is the started `SecondProcess`, or None where the ledger is verified here.
    """
    start = beside_start(run_dir)
    return nullcontext() if start is None else SecondProcess(start)


class Verification:
    """`verify_run(run_dir)` for a manifest read before, its ledger part in-process or beside.

    Beside (in `beside`, a `second_process_for(run_dir)`), only `verify_ledger` runs in the
    second process: it reads the run folder alone. The frozen inputs are checked here, once,
    while the second process verifies, through this process's track registry (a track
    registered in code is unknown to a spawned interpreter).
    """

    def __init__(self, run_dir: Path, manifest: Manifest, beside: SecondProcess | None) -> None:
        arguments = (run_dir, manifest.manifest_sha256, manifest.plan.trials)
        self._second = beside
        self._asked = beside.ask(verify_ledger, *arguments) if beside is not None else None
        self._report: VerifyReport | None = None
        # Grading and verification both read every page: let the kernel read the file ahead
        # (after the fork: the advice may start a thread).
        prefetch_ledger(run_dir)
        ledger_report = None if beside is not None else verify_ledger(*arguments)
        self.checked_track: Track | None
        """The track that checked the frozen inputs, once they were found intact (grading uses
        it, beside too: the inputs are hashed and parsed once per report)."""
        self.checked_track, self._input_problems = checked_track(manifest)
        if ledger_report is not None:
            self._report = self._with_inputs(ledger_report)

    @property
    def beside(self) -> bool:
        """True when the ledger is verified in the second process."""
        return self._second is not None

    def _with_inputs(self, report: VerifyReport) -> VerifyReport:
        report.problems += self._input_problems
        return report

    def result(self) -> VerifyReport:
        """The verification's report, as `verify_run`'s (waits for the second process).

        Raises:
            TrustbenchError: what `verify_ledger` raised (a missing ledger, a file that is no
                ledger), in whichever process it ran; or, when the second process ended without
                answering (killed), one saying so: nothing is reported unverified.
        """
        if self._report is None:
            assert self._second is not None and self._asked is not None
            self._report = self._with_inputs(self._second.answer(self._asked))
        return self._report
