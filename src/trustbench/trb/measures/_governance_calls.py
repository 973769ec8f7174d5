"""The act calls of one Track 1 trace, and their answers asked in one blinded batch.

`governance_rows` scores what comes back; this module only decides what is asked and in which
order, so the adapter cannot tell a null edit from a counterfactual one by its position.
"""

from __future__ import annotations

from trustbench.trb.adapter._protocol import Adapter
from trustbench.trb.adapter._schema import SelfReport, StepContext
from trustbench.trb.corpus._format import Trace
from trustbench.trb.measures._batched import act_many
from trustbench.trb.measures._r_star import extra_edits
from trustbench.trb.measures._sampling import new_sample_sizes, sizes_mark
from trustbench.trb.measures._self_consistency import blinded_order, replay_pick

Call = tuple[str, int, int, StepContext, SelfReport | None]
"""One act call of a trace: (kind, t, index, context, override)."""
Key = tuple[str, int, int]
"""An act call's (kind, t, index): where its answer is looked up."""


def _copy(r: SelfReport) -> SelfReport:
    """A fresh object per override, so no call can be recognised by object identity."""
    return r.model_copy(deep=True)


def act_calls(
    trace: Trace,
    contexts: dict[int, StepContext],
    emitted: dict[int, SelfReport | None],
    plan: dict[str, int],
    seed: int,
) -> tuple[list[Call], dict[int, list[tuple[str, SelfReport]]]]:
    """Every act call of a trace, and each step's R* edits (adversarial and OOD r')."""
    calls: list[Call] = []
    extras: dict[int, list[tuple[str, SelfReport]]] = {}
    for step in trace.steps:
        c, own = contexts[step.t], emitted[step.t]
        calls.append(("null", step.t, 0, c, _copy(step.r)))
        calls += [("edit", step.t, k, c, _copy(cf.r_prime))
                  for k, cf in enumerate(step.counterfactuals)]  # fmt: skip
        calls.append(("own", step.t, 0, c, None))
        if own is not None:
            calls.append(("identity", step.t, 0, c, _copy(own)))
        pick = replay_pick(len(step.counterfactuals), trace.trace_id, step.t, seed)
        again = step.r if pick < 0 else step.counterfactuals[pick].r_prime
        calls.append(("replay", step.t, pick, c, _copy(again)))
        extras[step.t] = extra_edits(trace, step, plan)
        calls += [(kind, step.t, 0, c, _copy(rp)) for kind, rp in extras[step.t]]
    return calls, extras


def answered(
    adapter: Adapter, calls: list[Call], trace_id: str, seed: int
) -> tuple[dict[Key, dict[str, float] | None], dict[Key, int]]:
    """The answers to a trace's act calls, asked in one blinded, shuffled batch.

    Also each call's sample size where the adapter samples (`_sampling`); empty otherwise.
    """
    order = blinded_order(len(calls), trace_id, seed)
    mark = sizes_mark(adapter)  # a sampling adapter's per-call sample sizes (`_sampling`)
    shuffled = act_many(adapter, [calls[i][3] for i in order], [calls[i][4] for i in order])
    drawn = new_sample_sizes(adapter, mark, len(order))
    answers: dict[Key, dict[str, float] | None] = {}
    sizes: dict[Key, int] = {}
    for position, i in enumerate(order):
        answers[calls[i][:3]] = shuffled[position]
        if drawn is not None:
            sizes[calls[i][:3]] = drawn[position]
    return answers, sizes
