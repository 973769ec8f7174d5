"""Pacing of calls: per-endpoint token-bucket rate limits and exponential backoff with jitter."""

from __future__ import annotations

import random
import time

from trustbench.core._spec import RetryPolicy


class TokenBucket:
    """Allow `rate` calls per second on average, with bursts of up to `burst` calls.

    Implemented as slot reservation (a "virtual scheduling" token bucket): each caller reserves
    the next free slot `1/rate` after the previous one, but may start up to `burst - 1` slots
    in the past, so an idle bucket lets a burst through at once. Callers are served in arrival
    order and no caller polls.
    """

    def __init__(self, rate: float, burst: int | None = None) -> None:
        self.rate = rate
        self.burst = burst if burst is not None else max(1, int(rate))
        self._next = 0.0

    async def acquire(self) -> None:
        """Wait until this caller's slot."""
        import asyncio

        now = time.monotonic()
        slot = max(self._next, now - (self.burst - 1) / self.rate)
        self._next = slot + 1.0 / self.rate
        if slot > now:
            await asyncio.sleep(slot - now)


def backoff_delay(
    policy: RetryPolicy, retry_number: int, retry_after_s: float | None, rng: random.Random
) -> float:
    """Seconds to wait before transport retry `retry_number` (0 for the first retry).

    Exponential backoff with "full jitter" (AWS Architecture Blog, "Exponential Backoff and
    Jitter", 2015): wait U(0, min(max, base * 2**n)). Spreading waits uniformly keeps concurrent
    trials that failed together from retrying together. A server's Retry-After is a floor when
    honoured (capped by `retry_after_max_s`), because retrying earlier is known to fail.
    """
    ceiling = min(policy.backoff_max_s, policy.backoff_base_s * (2**retry_number))
    delay = rng.uniform(0.0, ceiling) if policy.jitter == "full" else ceiling
    if policy.honour_retry_after and retry_after_s is not None:
        delay = max(delay, min(retry_after_s, policy.retry_after_max_s))
    return delay
