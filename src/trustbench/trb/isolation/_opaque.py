"""Opaque trace ids: what an adapter is told a trace is called, unlinkable to the corpus.

A corpus trace id names its split (`eval-0003`, `transfer_wind-0001`): an adapter reading it
knows which contexts are evaluated and can key a memorised answer table by it. The harness
sends `trace-<16 hex>` instead: HMAC-SHA256 of the real id under a per-run key (the frozen
manifest's SHA-256, which the adapter cannot read), so the same trace gets the same id on a
resumed run and no adapter can compute the mapping.
"""

from __future__ import annotations

import hashlib
import hmac

from trustbench.trb.adapter._schema import StepContext


def opaque_trace_id(trace_id: str, key: str) -> str:
    """The id an adapter sees for `trace_id` in the run keyed by `key`."""
    digest = hmac.new(key.encode(), trace_id.encode(), hashlib.sha256).hexdigest()
    return f"trace-{digest[:16]}"


def blind_context(context: StepContext, key: str) -> StepContext:
    """The context with its trace id replaced by the opaque one."""
    return context.model_copy(update={"trace_id": opaque_trace_id(context.trace_id, key)})
