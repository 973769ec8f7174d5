"""Exact finite-state worlds whose do-effects can be computed, not estimated."""

from trustbench.trb.worlds._corridor import (
    CorridorConfig,
    CorridorWorld,
    Episode,
    StepRecord,
    reference_continuation,
)

__all__ = ["CorridorConfig", "CorridorWorld", "Episode", "StepRecord", "reference_continuation"]
