from __future__ import annotations

import asyncio
import random
import time

from trustbench.core import RetryPolicy
from trustbench.core._context import TokenBucket, backoff_delay


def test_token_bucket_spaces_calls_to_the_declared_rate_after_a_burst() -> None:
    bucket = TokenBucket(rate=50.0, burst=2)

    async def go() -> list[float]:
        stamps = []
        for _ in range(6):
            await bucket.acquire()
            stamps.append(time.monotonic())
        return stamps

    stamps = asyncio.run(go())
    assert stamps[1] - stamps[0] < 0.015  # the burst passes at once
    assert stamps[-1] - stamps[0] >= 4 / 50 - 0.005  # then 1/rate apart


def test_full_jitter_backoff_stays_within_the_exponential_ceiling() -> None:
    policy = RetryPolicy(backoff_base_s=0.5, backoff_max_s=4.0)
    rng = random.Random(1)
    for retry in range(6):
        ceiling = min(4.0, 0.5 * 2**retry)
        delays = [backoff_delay(policy, retry, None, rng) for _ in range(200)]
        assert all(0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling * 0.8  # actually spread, not constant


def test_backoff_is_reproducible_from_its_seed() -> None:
    policy = RetryPolicy()
    first = [backoff_delay(policy, 2, None, random.Random(5)) for _ in range(3)]
    assert first == [backoff_delay(policy, 2, None, random.Random(5)) for _ in range(3)]


def test_retry_after_is_a_floor_capped_by_the_policy() -> None:
    policy = RetryPolicy(backoff_base_s=0.01, backoff_max_s=0.02, retry_after_max_s=3.0)
    rng = random.Random(0)
    assert backoff_delay(policy, 0, 1.5, rng) == 1.5
    assert backoff_delay(policy, 0, 100.0, rng) == 3.0
    ignoring = RetryPolicy(backoff_base_s=0.01, backoff_max_s=0.02, honour_retry_after=False)
    assert backoff_delay(ignoring, 0, 1.5, rng) <= 0.02
