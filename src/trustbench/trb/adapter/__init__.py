"""The TRB adapter contract (spec §2): `emit_r`, `act(r_override)`, its schema, conformance kit."""

from __future__ import annotations

from trustbench.trb.adapter._conformance import ConformanceCheck, check_adapter, load_factory
from trustbench.trb.adapter._protocol import (
    ACTIONS,
    TRB_VERSION,
    Adapter,
    AdapterTier,
    BatchedAdapter,
    LogProbAdapter,
    Observation,
    OverrideUnsupported,
    SelfReport,
    StepContext,
)

__all__ = [
    "ACTIONS",
    "TRB_VERSION",
    "Adapter",
    "AdapterTier",
    "BatchedAdapter",
    "ConformanceCheck",
    "LogProbAdapter",
    "Observation",
    "OverrideUnsupported",
    "SelfReport",
    "StepContext",
    "check_adapter",
    "load_factory",
]
