"""A member trial's latency, tokens and cost totals: the one-attempt shortcut sums as before."""

from __future__ import annotations

from itertools import product
from typing import Any

from trustbench.rtb.review._grading import (
    _attempt_totals,  # pyright: ignore[reportPrivateUsage]
    _sum_or_none,  # pyright: ignore[reportPrivateUsage]
)

VALUES: tuple[Any, ...] = (None, 0, 3, -0.0, 0.25, 1e-300)


def _summed(attempts: list[dict[str, Any]]) -> tuple[Any, Any, Any]:
    """The totals as `_member_trial` made them before the shortcut: three lists, each summed."""
    tokens = [
        (a["prompt_tokens"] or 0) + (a["completion_tokens"] or 0)
        if a["prompt_tokens"] is not None or a["completion_tokens"] is not None
        else None
        for a in attempts
    ]
    return (
        _sum_or_none([a["latency_s"] for a in attempts]),
        _sum_or_none(tokens),
        _sum_or_none([a["cost_usd"] for a in attempts]),
    )


def _attempt(values: tuple[Any, ...]) -> dict[str, Any]:
    latency, prompt, completion, cost = values
    return {
        "latency_s": latency,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cost_usd": cost,
    }


def test_totals_equal_the_summed_lists_value_and_type() -> None:
    singles = [_attempt(values) for values in product(VALUES, repeat=4)]
    pairs = ([a, b] for a, b in zip(singles, reversed(singles), strict=True))
    cases = [[], *([a] for a in singles), *pairs]
    for attempts in cases:
        got, expected = _attempt_totals(attempts), _summed(attempts)
        # repr tells -0.0 from 0.0 and 0 from 0.0, which == does not.
        assert repr(got) == repr(expected), attempts
