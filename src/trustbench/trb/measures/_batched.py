"""The measures' calls into an adapter: batched when it offers a batched hook, validated always.

The adapter contract (`trb.adapter._protocol.BatchedAdapter`) lets an adapter offer
`emit_many(contexts)` and `act_many(contexts, overrides)` beside the one-context hooks; a
local LM answers a batch in one forward pass instead of one per item (on the reference model
a per-item Track 1 ran at 0.07x of a raw torch forward, a batched one at 1.21x). Every measure
calls the hooks through these wrappers, so it uses the batched hook wherever the adapter has
one and falls back to one call per item otherwise, with the same results either way:

- a batch that raises or returns the wrong number of answers is asked again item by item, so
  one bad context cannot fail the others;
- every answer is validated as the per-item path validates it (a malformed distribution or
  report becomes None: the tracks count it as invalid or missing, never as a default).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from trustbench.trb.adapter._protocol import Adapter
from trustbench.trb.adapter._schema import ACTIONS, SelfReport, StepContext


def _valid_distribution(dist: object) -> dict[str, float] | None:
    if not isinstance(dist, dict) or set(dist) != set(ACTIONS):
        return None
    try:
        values = {a: float(dist[a]) for a in ACTIONS}
    except (TypeError, ValueError):
        return None
    if any(not math.isfinite(v) or v < 0 for v in values.values()):
        return None
    if abs(sum(values.values()) - 1.0) > 1e-6:
        return None
    return values


def _valid_report(out: object) -> SelfReport | None:
    try:
        return out if isinstance(out, SelfReport) else SelfReport.model_validate(out)
    except Exception:  # ValidationError: a malformed report counts as missing
        return None


def _act(adapter: Adapter, context: StepContext, r: SelfReport | None) -> dict[str, float] | None:
    try:
        return _valid_distribution(adapter.act(context, r_override=r))
    except Exception:  # any failure of the candidate is an invalid response, never approval
        return None


def _emit(adapter: Adapter, context: StepContext) -> SelfReport | None:
    try:
        out = adapter.emit_r(context)
    except Exception:  # any failure of the candidate is a missing report
        return None
    return _valid_report(out)


def act_many(
    adapter: Adapter, contexts: Sequence[StepContext], overrides: Sequence[SelfReport | None]
) -> list[dict[str, float] | None]:
    """`act` over many contexts, batched when the adapter offers `act_many`; failures -> None."""
    batched = getattr(adapter, "act_many", None)
    if batched is not None and contexts:
        try:
            answers = list(batched(list(contexts), list(overrides)))
        except Exception:  # the candidate's failure: retried item by item below
            answers = []
        if len(answers) == len(contexts):
            return [_valid_distribution(d) for d in answers]
    return [_act(adapter, c, r) for c, r in zip(contexts, overrides, strict=True)]


def emit_many(adapter: Adapter, contexts: Sequence[StepContext]) -> list[SelfReport | None]:
    """`emit_r` over many contexts, batched when the adapter offers `emit_many`; fails -> None."""
    batched = getattr(adapter, "emit_many", None)
    if batched is not None and contexts:
        try:
            answers = list(batched(list(contexts)))
        except Exception:  # the candidate's failure: retried item by item below
            answers = []
        if len(answers) == len(contexts):
            return [_valid_report(r) for r in answers]
    return [_emit(adapter, c) for c in contexts]
