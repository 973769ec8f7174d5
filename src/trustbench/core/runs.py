"""Core's public API for commands that create, lock and write into run folders.

Output checks (`check_output_folder`, `check_output_file`, `output_path`) refuse to overwrite a
run's evidence and `write_atomically` writes an output without following a link (`write_output`
streams to a FIFO, a device or `-` instead, never replacing it; `is_standard_output` says when
other messages belong on standard error); `RunLock` keeps
two processes out of one run folder; progress reporters show a run's progress; `utc_now` is the
one clock a ledger row is stamped with; `entry_code_items` finds, without importing it, the
code of a `module:factory` entry that the manifest pins (its file and whole package). Names resolve
lazily (see `trustbench._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

if TYPE_CHECKING:
    from trustbench.core._candidate_code import entry_code_items
    from trustbench.core._clock import utc_now
    from trustbench.core._outputs import (
        check_output_file,
        check_output_folder,
        is_run_folder,
        is_standard_output,
        output_path,
        write_atomically,
        write_output,
    )
    from trustbench.core._progress import NoProgress, ProgressReporter, default_progress
    from trustbench.core._run_folder import RunLock

__all__ = [
    "NoProgress",
    "ProgressReporter",
    "RunLock",
    "check_output_file",
    "check_output_folder",
    "default_progress",
    "entry_code_items",
    "is_run_folder",
    "is_standard_output",
    "output_path",
    "utc_now",
    "write_atomically",
    "write_output",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
