"""Wait for a child process to say it is ready, instead of sleeping or trusting a fixed delay.

A reader thread drains the stream, so a slow start on a loaded machine only costs the time it
really takes, a silent hang is bounded by a generous deadline, and a process that exits early
fails at once with everything it printed.
"""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from typing import IO

READY_TIMEOUT_S = 180.0
"""Upper bound on a start-up; only reached when something hangs (the wait returns on readiness)."""


class LineReader:
    """Collects a text stream's lines on a daemon thread; `wait_for` reads them as they come."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._drain, args=(stream,), daemon=True).start()

    def _drain(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(
        self,
        process: subprocess.Popen[str],
        pattern: str,
        *,
        timeout_s: float = READY_TIMEOUT_S,
        until: str | None = None,
    ) -> list[re.Match[str]]:
        """Lines matching `pattern` until one matches `until` (or, without it, the first match).

        Raises:
            AssertionError: The process ended or the deadline passed first (with its output).
        """
        deadline = time.monotonic() + timeout_s
        found: list[re.Match[str]] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"not ready after {timeout_s:.0f} s:\n{''.join(self.lines)}")
            try:
                line = self._queue.get(timeout=min(remaining, 1.0))
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(
                    f"process ended ({process.wait()}) before it was ready:\n{''.join(self.lines)}"
                )
            self.lines.append(line)
            match = re.search(pattern, line)
            if match:
                found.append(match)
            if (until is None and match) or (until is not None and re.search(until, line)):
                return found
