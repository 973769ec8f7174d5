"""Adapter isolation: user adapters run in a sandboxed worker process that sees only contexts.

A `MODULE:FACTORY` adapter is untrusted code: in the harness process it could read the corpus
(r, Phi(r'), the labels, the other splits) from the cache and score perfectly. So the track runs
it in `_worker`, a separate process in its own empty folder, restricted by Landlock (else a
named fallback), that receives contexts with opaque trace ids and nothing else.
"""

from __future__ import annotations

from trustbench.trb.isolation._client import (
    AdapterFailed,
    AdapterWorker,
    IsolatedAdapter,
    read_paths,
    refuse_overlap,
)
from trustbench.trb.isolation._worker import opaque_trace_id

__all__ = [
    "AdapterFailed",
    "AdapterWorker",
    "IsolatedAdapter",
    "opaque_trace_id",
    "read_paths",
    "refuse_overlap",
]
