"""Exact finite-state worlds whose do-effects can be computed, not estimated."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

if TYPE_CHECKING:
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

__getattr__, __dir__ = lazy_exports(__name__, __file__)
