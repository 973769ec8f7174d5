"""Run progress: a rich progress bar on a terminal, plain periodic lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import Protocol, TextIO


class ProgressReporter(Protocol):
    """Receives run progress; implementations must be cheap (called once per trial)."""

    def start(self, total: int, done: int) -> None:
        """The run starts with `done` of `total` trials already finished."""
        ...

    def update(self, done: int, failed: int, retries: int) -> None:
        """Counts changed."""
        ...

    def close(self) -> None:
        """The run ended."""
        ...


class PlainProgress:
    """One line every `every_s` seconds (and at the end): for logs and CI."""

    def __init__(self, stream: TextIO | None = None, every_s: float = 5.0) -> None:
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self._total = self._done = self._failed = self._retries = 0
        self._last = 0.0
        self._started = 0.0
        self._first_done = 0

    def start(self, total: int, done: int) -> None:
        """Print the starting point."""
        self._total, self._done, self._first_done = total, done, done
        self._started = self._last = time.monotonic()
        self._line()

    def update(self, done: int, failed: int, retries: int) -> None:
        """Print at most one line per `every_s`."""
        self._done, self._failed, self._retries = done, failed, retries
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            self._line()

    def close(self) -> None:
        """Print the final counts."""
        self._line()

    def _line(self) -> None:
        elapsed = time.monotonic() - self._started
        ran = self._done - self._first_done
        eta = ""
        if ran and self._done < self._total:
            eta = f", ETA {elapsed / ran * (self._total - self._done):.0f} s"
        print(
            f"trials {self._done}/{self._total} done, {self._failed} failed, "
            f"{self._retries} transport retries{eta}",
            file=self.stream,
            flush=True,
        )


class RichProgress:
    """A live progress bar (done/total, failed, retries, ETA) on a terminal."""

    def __init__(self) -> None:
        # rich is imported here, for a terminal's bar only: `run --quiet` and plain lines never
        # load it (start-up, issue 35).
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("trials"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("failed {task.fields[failed]} retries {task.fields[retries]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self._task = None

    def start(self, total: int, done: int) -> None:
        """Show the bar."""
        self._progress.start()
        self._task = self._progress.add_task(
            "run", total=total, completed=done, failed=0, retries=0
        )

    def update(self, done: int, failed: int, retries: int) -> None:
        """Move the bar."""
        if self._task is not None:
            self._progress.update(self._task, completed=done, failed=failed, retries=retries)

    def close(self) -> None:
        """Stop the bar."""
        self._progress.stop()


class NoProgress:
    """Reports nothing (for tests and library use)."""

    def start(self, total: int, done: int) -> None:
        """Ignore."""

    def update(self, done: int, failed: int, retries: int) -> None:
        """Ignore."""

    def close(self) -> None:
        """Ignore."""


def default_progress() -> ProgressReporter:
    """A rich bar when stderr is a terminal, plain lines otherwise."""
    return RichProgress() if sys.stderr.isatty() else PlainProgress()
