"""The simulated clock every platform component shares within one trial.

Time is simulated so that expiry, queueing delay, slow services and the observation deadline are
exact and reproducible; nothing here sleeps.
"""

from __future__ import annotations

from datetime import datetime, timedelta


class SimulatedClock:
    """A monotonic simulated clock that starts at a trial's declared start time."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("SimulatedClock needs a timezone-aware start time")
        self._start = start
        self._elapsed_s = 0.0

    def now(self) -> datetime:
        """Current simulated wall time (timezone-aware)."""
        return self._start + timedelta(seconds=self._elapsed_s)

    def elapsed_s(self) -> float:
        """Simulated seconds since the trial started."""
        return self._elapsed_s

    def advance(self, seconds: float) -> None:
        """Move time forward; time never moves backwards.

        Args:
            seconds: Non-negative number of simulated seconds.
        """
        if seconds < 0:
            raise ValueError("the simulated clock cannot move backwards")
        self._elapsed_s += seconds

    def advance_to(self, elapsed_s: float) -> None:
        """Move time forward to `elapsed_s` seconds after the start (no-op if already past)."""
        self._elapsed_s = max(self._elapsed_s, elapsed_s)
