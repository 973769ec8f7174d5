"""Sampling error of action distributions estimated from samples, carried into Track 1's interval.

A chat endpoint that returns no token logprobs (`transformers serve` ignores the field;
Anthropic's API has none) is asked `chat_samples` times per act instead, and the action
distribution is the frequency of the parsed answers. That estimate p_hat carries sampling
error the between-trace bootstrap does not see when traces are few (with one trace it has no
interval at all). An adapter that estimates by sampling says so per act call: its
`sample_sizes` list gets one entry per call (the parsed samples, 0 for an exact answer or a
failed call); `governance_rows` reads the entries of its act batch.

Per Track 1 item the sampling variance of TV(p_hat, Phi(r')) is estimated by a parametric
bootstrap within the item (multinomial redraws of n answers from p_hat, `ITEM_RESAMPLES`,
seeded per item), summed per trace (`tv_sampling_var_sum`), and added in quadrature to each
side of G's between-trace interval: Var(mean TV) = sum_i Var_i / N^2 (items' samples are
independent). This is conservative (the trace bootstrap already sees part of that noise), and
the upward bias of TV from a noisy p_hat (E[TV(p_hat, q)] >= TV(p, q)) is stated, not removed.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

import numpy as np

from trustbench.trb.adapter._schema import ACTIONS
from trustbench.trb.corpus._format import Trace

ITEM_RESAMPLES = 200
"""Multinomial redraws per sampled item (the within-item bootstrap)."""
METHOD = (
    "between-trace interval widened in quadrature by the within-item sampling variance "
    f"(parametric bootstrap, {ITEM_RESAMPLES} multinomial redraws per item); TV from sampled "
    "distributions is biased upward"
)

Key = tuple[str, int, int]


def new_sample_sizes(adapter: Any, before: int | None, calls: int) -> list[int] | None:
    """The adapter's per-call sample sizes since `before`, or None when it keeps none."""
    sizes = getattr(adapter, "sample_sizes", None)
    if before is None or not isinstance(sizes, list) or len(sizes) - before != calls:
        return None
    return [int(s) for s in sizes[before:]]


def sizes_mark(adapter: Any) -> int | None:
    """Where the adapter's `sample_sizes` list stands before a batch (None: it keeps none)."""
    sizes = getattr(adapter, "sample_sizes", None)
    return len(sizes) if isinstance(sizes, list) else None


def tv_sampling_variance(
    p_hat: Mapping[str, float], n: int, want: Mapping[str, float], *, seed: int
) -> float:
    """Variance of TV(p_hat, want) when p_hat is the frequency of n draws (parametric bootstrap)."""
    if n < 1:
        return 0.0
    rng = np.random.default_rng(seed)
    probs = np.array([p_hat[a] for a in ACTIONS], dtype=float)
    draws = rng.multinomial(n, probs / probs.sum(), size=ITEM_RESAMPLES) / n
    q = np.array([want[a] for a in ACTIONS], dtype=float)
    return float((0.5 * np.abs(draws - q).sum(axis=1)).var(ddof=1))


def _item_seed(trace_id: str, t: int, k: int) -> int:
    digest = hashlib.sha256(f"{trace_id}/{t}/{k}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def add_sampling_error(
    row: dict[str, Any],
    trace: Trace,
    answers: Mapping[Key, dict[str, float] | None],
    sizes: Mapping[Key, int] | None,
) -> None:
    """Add the trace's sampled-item count, smallest n and TV sampling-variance sum to `row`."""
    if not sizes:
        return
    var_sum, items, smallest = 0.0, 0, None
    for step in trace.steps:
        for k, cf in enumerate(step.counterfactuals):
            got, n = answers[("edit", step.t, k)], sizes.get(("edit", step.t, k), 0)
            if got is None or n < 1:
                continue  # exact, or invalid (TV = 1, no sampling error)
            var_sum += tv_sampling_variance(got, n, cf.continuation,
                                            seed=_item_seed(trace.trace_id, step.t, k))  # fmt: skip
            items += 1
            smallest = n if smallest is None else min(smallest, n)
    if items:
        row.update(tv_sampling_var_sum=var_sum, sampled_items=items, samples_min=smallest)


def with_sampling_error(g: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """G's summary with the sampling variance of its sampled items added to its interval."""
    sampled = sum(int(r.get("sampled_items", 0)) for r in rows)
    if not sampled or g["value"] is None or not g["items"]:
        return g
    level = float(g["interval"].get("level") or 0.95)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    sd = math.sqrt(sum(float(r.get("tv_sampling_var_sum", 0.0)) for r in rows)) / g["items"]
    value = g["value"]
    below = 0.0 if g["low"] is None else value - g["low"]
    above = 0.0 if g["high"] is None else g["high"] - value
    return {
        **g,
        "low": max(0.0, value - math.hypot(below, z * sd)),
        "high": min(1.0, value + math.hypot(above, z * sd)),
        "sampling": {
            "sampled_items": sampled,
            "samples_min": min(int(r["samples_min"]) for r in rows if r.get("sampled_items")),
            "sd": sd,
            "method": METHOD,
        },
    }


def widen_figure(figure: Any, counts: list[dict[str, Any]]) -> Any:
    """A G `Figure` whose two-sided intervals carry the sampled items' sampling variance.

    Every interval keeps its method (consumers look it up by method) and says in its `note`
    that it was widened and by how much; a between-trace interval that is not computable (one
    trace) becomes the sampling-only interval, so a sampled estimate never reads as exact.
    """
    sampled = sum(int(c.get("sampled_items", 0)) for c in counts)
    if not sampled or figure.status != "measured" or not figure.denominator:
        return figure
    sd = math.sqrt(sum(float(c.get("tv_sampling_var_sum", 0.0)) for c in counts))
    sd /= float(figure.denominator)
    smallest = min(int(c["samples_min"]) for c in counts if c.get("sampled_items"))
    value, widened = float(figure.estimate), []
    for interval in figure.intervals:
        if interval.sidedness != "two_sided":
            widened.append(interval)
            continue
        z = NormalDist().inv_cdf(0.5 + interval.confidence / 2)
        below = 0.0 if interval.lower is None else value - interval.lower
        above = 0.0 if interval.upper is None else interval.upper - value
        note = (f"widened for sampling: {sampled} item(s) estimated from >= {smallest} "
                f"sample(s) each, sampling sd {sd:.4f} ({METHOD})")  # fmt: skip
        if interval.not_computable:
            note += f"; between-trace part not computable ({interval.not_computable})"
        widened.append(interval.model_copy(update={
            "lower": max(0.0, value - math.hypot(below, z * sd)),
            "upper": min(1.0, value + math.hypot(above, z * sd)),
            "not_computable": None,
            "note": note if interval.note is None else f"{interval.note}; {note}",
        }))  # fmt: skip
    return figure.model_copy(update={"intervals": widened})
