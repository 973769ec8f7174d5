"""Adapter isolation: user adapters run in a sandboxed worker process that sees only contexts.

A `MODULE:FACTORY` adapter is untrusted code: in the harness process it could read the corpus
(r, Phi(r'), the labels, the other splits) from the cache and score perfectly. So the track runs
it in the sandbox's one worker (`trustbench.sandbox`), a separate process in its own empty folder,
restricted by Landlock (else a named fallback), where `_worker`'s session receives contexts with
opaque trace ids and nothing else.
"""

from __future__ import annotations

from trustbench.trb.isolation._client import (
    AdapterFailed,
    AdapterWorker,
    IsolatedAdapter,
    adapter_plan,
    refuse_overlap,
)
from trustbench.trb.isolation._worker import opaque_trace_id

__all__ = [
    "AdapterFailed",
    "AdapterWorker",
    "IsolatedAdapter",
    "adapter_plan",
    "opaque_trace_id",
    "refuse_overlap",
]
