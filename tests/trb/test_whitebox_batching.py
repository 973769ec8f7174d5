"""Batched `act_many` encodes each trace once yet answers exactly what per-context `act` does."""

import torch

from trustbench.trb.corpus import generate_split
from trustbench.trb.measures._grounding import ReferenceWhiteBox
from trustbench.trb.reference import ReferenceNativeModel


def _adapter_and_items() -> tuple[ReferenceWhiteBox, list, list]:
    torch.manual_seed(0)
    traces = generate_split("eval", 6, seed=5)
    world = traces[0].world
    model = ReferenceNativeModel(world.length, world.horizon, 16).eval()
    contexts, overrides = [], []
    for trace in traces:
        for step in trace.steps:
            for cf in step.counterfactuals[:3]:
                contexts.append(trace.context(step.t))
                overrides.append(cf.r_prime)
            contexts.append(trace.context(step.t))
            overrides.append(None)  # no override: the model's own r
    adapter = ReferenceWhiteBox(model, "ref", world.length, world.horizon, contexts[:4])
    return adapter, contexts, overrides


def _close(a: dict[str, float], b: dict[str, float]) -> bool:
    return all(abs(a[k] - b[k]) < 1e-6 for k in a) and a.keys() == b.keys()


def test_batched_act_equals_per_context_act_with_and_without_overrides() -> None:
    adapter, contexts, overrides = _adapter_and_items()
    batched = adapter.act_many(contexts, overrides)
    single = [adapter.act(c, r_override=r) for c, r in zip(contexts, overrides, strict=True)]
    assert all(_close(b, s) for b, s in zip(batched, single, strict=True))


def test_batched_act_handles_contexts_that_are_not_prefixes_of_one_history() -> None:
    adapter, contexts, overrides = _adapter_and_items()
    first, other = contexts[0], next(c for c in contexts if c.trace_id != contexts[0].trace_id)
    # Same trace id, another trace's observations: the shared encoding must not be used.
    impostor = other.model_copy(update={"trace_id": first.trace_id})
    mixed, mixed_overrides = [*contexts, impostor], [*overrides, None]
    batched = adapter.act_many(mixed, mixed_overrides)
    assert _close(batched[-1], adapter.act(impostor))
    assert all(
        _close(b, adapter.act(c, r_override=r))
        for b, c, r in zip(batched[:-1], contexts, overrides, strict=True)
    )
