"""TRB bench: `act` with `r_override` on the reference model vs the raw torch forward.

Run: `python -m bench.trb_act` from the repository root (options: `--help`).

The batch is Track 1's workload on generated eval traces: every (step, counterfactual r') item.
Measured, each as the best of `--repeats` runs on one torch thread:
- batched `act` path (the issue's target): a fresh `ReferenceWhiteBox` answering
  `act_many(contexts, r_overrides)` for every item in one call;
- the same batch through `trustbench.trb.measures._governance.act_many`, the wrapper the profile
tracks
  use, which also validates every returned distribution (harness work, shown apart);
- per-item `act` path: a fresh `NativeModelAdapter` answering `act(context, r_override=r')` for
  every item, as Track 1's `governance_rows` calls it (its per-context memo starts cold);
- raw forward: the same network on the same batch with tensors prepared beforehand: one GRU pass
  per trace, the hidden state of each item's step gathered, one batched policy call and softmax.
Prints items/s of both and act / raw (target >= 0.8), after checking both give the same
distributions (max abs difference). The model is untrained (seeded): cost does not depend on
weights, and no checkpoint has to be trained first.
"""

from __future__ import annotations

import argparse
import time

import torch

from bench._common import machine, ratio
from trustbench.trb.adapter._protocol import ACTIONS
from trustbench.trb.corpus import generate_split
from trustbench.trb.measures._governance import act_many
from trustbench.trb.measures._grounding import ReferenceWhiteBox
from trustbench.trb.reference import NativeModelAdapter, ReferenceNativeModel
from trustbench.trb.reference._model import encode_observation, encode_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=40)
    parser.add_argument("--hidden", type=int, default=64, help="TrainConfig's default width")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    traces = generate_split("eval", args.traces, seed=11)
    world = traces[0].world
    model = ReferenceNativeModel(world.length, world.horizon, args.hidden).eval()
    items = [
        (trace_index, step.t, trace.context(step.t), cf.r_prime)
        for trace_index, trace in enumerate(traces)
        for step in trace.steps
        for cf in step.counterfactuals
    ]
    print(
        f"trb act: {len(items)} items from {len(traces)} traces, hidden {args.hidden}, "
        f"1 torch thread; {machine()}"
    )

    def act_path() -> list[dict[str, float]]:
        adapter = NativeModelAdapter(model, "reference", world.length, world.horizon)
        return [adapter.act(context, r_override=r) for _, _, context, r in items]

    contexts = [context for _, _, context, _ in items]
    fit_contexts = contexts[:1]  # the ablation's mean r is not used by `act_many`

    r_primes = [r for _, _, _, r in items]

    def batched_act_path() -> list[dict[str, float]]:
        adapter = ReferenceWhiteBox(model, "reference", world.length, world.horizon, fit_contexts)
        return adapter.act_many(contexts, r_primes)

    def validated_batch_path() -> list[dict[str, float] | None]:
        adapter = ReferenceWhiteBox(model, "reference", world.length, world.horizon, fit_contexts)
        return act_many(adapter, contexts, r_primes)

    sequences = [
        torch.tensor(
            [[encode_observation(s.observation, world.length, world.horizon) for s in t.steps]]
        )
        for t in traces
    ]
    trace_index = torch.tensor([i for i, _, _, _ in items])
    step_index = torch.tensor([t for _, t, _, _ in items])
    overrides = torch.tensor([encode_report(r) for _, _, _, r in items])
    longest = max(len(t.steps) for t in traces)

    def raw_forward() -> torch.Tensor:
        with torch.no_grad():
            hidden = torch.zeros(len(traces), longest, args.hidden)
            for i, sequence in enumerate(sequences):
                h, _ = model.encode(sequence)
                hidden[i, : h.shape[1]] = h[0]
            h_items = hidden[trace_index, step_index]
            return torch.softmax(model.policy_logits(h_items, overrides).double(), -1)

    def best(function) -> tuple[float, object]:
        times, result = [], None
        for _ in range(args.repeats):
            started = time.perf_counter()
            result = function()
            times.append(time.perf_counter() - started)
        return min(times), result

    batch_s, batch_out = best(batched_act_path)
    checked_s, checked_out = best(validated_batch_path)
    act_s, act_out = best(act_path)
    raw_s, raw_out = best(raw_forward)
    if any(d is None for d in checked_out):
        raise SystemExit("a batched distribution failed validation: no figure computed")
    for label, out in (("batched act", batch_out), ("per-item act", act_out)):
        got = torch.tensor([[d[a] for a in ACTIONS] for d in out], dtype=torch.float64)
        difference = float((got - raw_out).abs().max())
        print(f"  max |{label} - raw|  {difference:.2e}  (same network, same batch)")
    print(f"  batched act_many      {len(items) / batch_s:10.0f} items/s  ({batch_s:.3f} s)")
    print(f"  + harness validation  {len(items) / checked_s:10.0f} items/s  ({checked_s:.3f} s)")
    print(f"  per-item act          {len(items) / act_s:10.0f} items/s  ({act_s:.3f} s)")
    print(f"  raw torch forward     {len(items) / raw_s:10.0f} items/s  ({raw_s:.3f} s)")
    print(f"  batched act / raw     {ratio(raw_s, batch_s)}  (target >= 0.8)")
    print(f"  validated batch / raw {ratio(raw_s, checked_s)}  (what a profile track pays)")
    print(f"  per-item act / raw    {ratio(raw_s, act_s)}  (Track 1's current call pattern)")


if __name__ == "__main__":
    main()
