"""Batched, failure-counting calls into an adapter, shared by Tracks 2, 4, 5 and 6.

Adapters expose one-context hooks (`emit_r`, `act`); some also offer batched ones
(`emit_many`, `act_many`, `act_without_r_many`), which the tracks use when present because
rollouts visit thousands of contexts. Any exception or malformed distribution from the
candidate becomes `None`: the tracks count it as a failure (never as success).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from trustbench.trb.adapter._protocol import Adapter
from trustbench.trb.adapter._schema import SelfReport, StepContext
from trustbench.trb.measures._governance import _emit, _valid_distribution
from trustbench.trb.measures._governance import (
    act_many as act_many,  # re-exported: shared with Track 1
)

Dist = dict[str, float] | None
BatchPolicy = Callable[[Sequence[StepContext]], list[Dist]]
"""Maps contexts to action distributions (None where the candidate failed)."""


class AblationUnsupported(Exception):
    """The adapter offers no no-r ablation; tracks that need one report `not run`."""


def emit_many(adapter: Adapter, contexts: Sequence[StepContext]) -> list[SelfReport | None]:
    """`emit_r` over many contexts, batched when the adapter can; failures become None."""
    batched = getattr(adapter, "emit_many", None)
    if batched is not None:
        try:
            return list(batched(list(contexts)))
        except Exception:  # fall back to one call each
            pass
    return [_emit(adapter, c) for c in contexts]


def ablation_policy(adapter: Adapter, ablation: Any = None) -> BatchPolicy:
    """The no-r ablation as a batch policy: an explicit one, or the adapter's own.

    Raises:
        AblationUnsupported: neither is available.
    """
    source = ablation if ablation is not None else adapter
    batched = getattr(source, "act_without_r_many", None)
    single = getattr(source, "act_without_r", None)
    if batched is None and single is None:
        raise AblationUnsupported(f"{adapter.name} offers no act_without_r (no-r ablation)")

    def policy(contexts: Sequence[StepContext]) -> list[Dist]:
        if batched is not None:
            try:
                return [_valid_distribution(d) for d in batched(list(contexts))]
            except Exception:  # fall back to one call each
                pass
        out: list[Dist] = []
        for c in contexts:
            try:
                out.append(_valid_distribution(single(c)))  # type: ignore[misc]
            except Exception:  # counted failure
                out.append(None)
        return out

    return policy
