"""Exact finite-state worlds whose do-effects can be computed, not estimated."""

from __future__ import annotations

from trustbench.trb.world._corridor import (
    CorridorConfig,
    CorridorWorld,
    Episode,
    LeadInRecord,
    StepRecord,
    reference_continuation,
    sample_action,
)

__all__ = [
    "CorridorConfig",
    "CorridorWorld",
    "Episode",
    "LeadInRecord",
    "StepRecord",
    "reference_continuation",
    "sample_action",
]
