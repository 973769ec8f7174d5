"""Operating measures shared by the RTB tracks: latency, tokens and cost, escalation volume.

The spec asks to "retain latency, total cost, escalation volume, and time until an intervention
actually blocks dispatch" beside the safety figures, so a design that is safe only because it is
slow, costly or escalates everything shows it. Each track reads its own records (the workflow's
trajectories, the reviewer's ledger attempts, the control path's observer) and reports them in
these shapes, so `record.json` has one vocabulary for them in every track:

- latency: nearest-rank p50 and p95 over the calls with a measured duration (`calls` is the
  denominator), in wall seconds;
- tokens and cost: totals, `None` (never 0) unless every call reported them;
- escalation volume: holds (a request handed to a human) over a stated denominator, with an
  exact interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel

from trustbench._docstrings import documented
from trustbench.core.stats import binomial_interval


class _Frozen(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class LatencySummary(_Frozen):
    """Wall-clock latency of one kind of call across a configuration's trials."""

    calls: int
    """Calls with a measured duration (the denominator of both quantiles)."""
    p50_s: float | None
    """Median seconds; `None` without a measured call."""
    p95_s: float | None
    """95th percentile seconds (nearest rank); `None` without a measured call."""


class UsageTotals(_Frozen):
    """Tokens and cost over a configuration's model calls; unknown stays `None`, never 0."""

    model_calls: int
    """Model calls made (the denominator of both totals)."""
    calls_with_tokens: int
    """Model calls that reported both token counts."""
    calls_with_cost: int
    """Model calls with a known cost."""
    prompt_tokens: int | None
    """Total input tokens; `None` unless every model call (at least one) reported them."""
    completion_tokens: int | None
    """Total output tokens; `None` on the same rule."""
    cost_usd: float | None
    """Total cost; `None` unless every model call (at least one) had a known cost."""


class EscalationVolume(_Frozen):
    """Holds (requests handed to a human) over a stated denominator."""

    holds: int
    """Holds counted."""
    answers: int
    """What the holds are counted over (the denominator: boundary answers, trials or cases)."""
    per_trial: float | None
    """Holds per trial; `None` without trials."""
    rate: float | None
    """holds / answers; `None` when there was no answer."""
    interval: tuple[float, float] | None
    """Two-sided 95% Clopper-Pearson interval of `rate` (`None` when there was no answer); where
    the answers are not independent (several within a trial) read it as indicative."""


def nearest_rank(ordered: list[float], share: float) -> float:
    """The nearest-rank percentile (Hyndman & Fan type 1): an observed value, never interpolated."""
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def latency_summary(durations: list[float]) -> LatencySummary:
    """p50 / p95 of the measured durations (an empty list is `calls=0` with unknown quantiles)."""
    ordered = sorted(durations)
    if not ordered:
        return LatencySummary(calls=0, p50_s=None, p95_s=None)
    return LatencySummary(
        calls=len(ordered),
        p50_s=round(nearest_rank(ordered, 0.5), 6),
        p95_s=round(nearest_rank(ordered, 0.95), 6),
    )


def median_interval(ordered: Sequence[float], confidence: float) -> tuple[float, float] | None:
    """Distribution-free interval of the median: two order statistics (sorted input).

    The number of observations below the median is Binomial(n, 1/2), so the interval from the
    r-th smallest to the r-th largest observation covers the median with probability
    1 - 2 P(X <= r - 1) (Conover, *Practical Nonparametric Statistics*, 3rd ed., 3.2). The
    largest r keeping that at or above `confidence` gives the narrowest such interval; below
    about six observations (at 95%) none does, and the interval is `None`.
    """
    n = len(ordered)
    tail = (1.0 - confidence) / 2.0
    cumulative, rank = 0.0, 0
    while rank < n:
        cumulative += math.comb(n, rank) / 2.0**n  # P(X <= rank)
        if cumulative > tail:
            break
        rank += 1
    if rank == 0:
        return None
    return (ordered[rank - 1], ordered[n - rank])


CallUsage = tuple[int | None, int | None, float | None]
"""One model call's (prompt_tokens, completion_tokens, cost_usd) as it reported them."""


class UsageTally:
    """`UsageTotals` added call by call (a streamed report keeps sums, not the calls)."""

    def __init__(self) -> None:
        self.calls = 0
        self.with_tokens = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.costed = 0
        self.cost_usd = 0.0

    def add(self, prompt: int | None, completion: int | None, cost: float | None) -> None:
        """Count one model call as it reported its tokens and cost (`None`: not reported)."""
        self.calls += 1
        if prompt is not None and completion is not None:
            self.with_tokens += 1
            self.prompt_tokens += prompt
            self.completion_tokens += completion
        if cost is not None:
            self.costed += 1
            self.cost_usd += cost

    def result(self) -> UsageTotals:
        """The totals, each `None` unless every call (at least one) reported it."""
        every_tokens = self.calls > 0 and self.with_tokens == self.calls
        every_cost = self.calls > 0 and self.costed == self.calls
        return UsageTotals(
            model_calls=self.calls,
            calls_with_tokens=self.with_tokens,
            calls_with_cost=self.costed,
            prompt_tokens=self.prompt_tokens if every_tokens else None,
            completion_tokens=self.completion_tokens if every_tokens else None,
            cost_usd=round(self.cost_usd, 8) if every_cost else None,
        )


def usage_totals(calls: Sequence[CallUsage]) -> UsageTotals:
    """Tokens and cost over the model calls, each total `None` unless every call reported it."""
    tally = UsageTally()
    for prompt, completion, cost in calls:
        tally.add(prompt, completion, cost)
    return tally.result()


def escalation_volume(holds: int, answers: int, trials: int) -> EscalationVolume:
    """Holds over `answers` with an exact interval; `per_trial` over `trials`."""
    per_trial = round(holds / trials, 6) if trials else None
    if not answers:
        return EscalationVolume(
            holds=holds, answers=0, per_trial=per_trial, rate=None, interval=None
        )
    ci = binomial_interval(holds, answers, "clopper_pearson", 0.95)
    return EscalationVolume(
        holds=holds,
        answers=answers,
        per_trial=per_trial,
        rate=round(holds / answers, 6),
        interval=(round(ci.lower or 0.0, 6), round(ci.upper or 1.0, 6)),
    )


def seconds_text(value: float | None) -> str:
    """A duration for a report line; `n/a` when unknown."""
    return "n/a" if value is None else f"{value:.4g} s"


def usage_text(usage: UsageTotals) -> str:
    """`N tokens, $C over M model call(s)`, each unknown said as such (never 0)."""
    tokens = (
        "tokens unknown"
        if usage.prompt_tokens is None or usage.completion_tokens is None
        else f"{usage.prompt_tokens + usage.completion_tokens} tokens"
    )
    cost = "cost unknown" if usage.cost_usd is None else f"${usage.cost_usd:.4g}"
    return f"{tokens}, {cost} over {usage.model_calls} model call(s)"


def rate_text(volume: EscalationVolume) -> str:
    """`rate [lower, upper]` of an escalation volume; `n/a` without a denominator."""
    if volume.rate is None or volume.interval is None:
        return "n/a"
    return f"{volume.rate:.1%} [{volume.interval[0]:.1%}, {volume.interval[1]:.1%}]"
