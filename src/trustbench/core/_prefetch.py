"""Tell the kernel a large ledger is about to be read whole, so it reads it ahead.

`report` and `verify` read every page of a ledger, but SQLite asks for them 4 KiB at a time
and in b-tree order, which on a ledger the page cache does not hold (a new machine, a reboot,
a run that finished hours ago) is a stream of small random reads: a 3.3 GB, 1,000,000-trial
ledger took 113 to 121 s to report cold against 75 s warm on a 2-core machine whose disk reads
1.6 GB/s in sequence. Advising the kernel that the whole file will be needed
(`posix_fadvise(POSIX_FADV_WILLNEED)`) makes it read the file ahead in large sequential
requests while the reading starts.

The kernel takes at most a few MiB of readahead per call, so the file is advised in steps of
`STEP_BYTES`. That loop costs about half a second of system time for 3 GB, so it runs in a
daemon thread (the call releases the GIL) and the caller does not wait for it. A file larger
than half the memory the machine has free is not advised: reading it whole into the cache
would evict other pages and then itself. Where the call does not exist (not Linux or another
POSIX system) nothing is done: the advice changes how fast pages arrive, never what is read.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from trustbench.core._ledger import LEDGER_FILE

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
