"""TRB Tracks 2, 4, 5 and 6 (Tracks 1 and 3 live in `trustbench.trb.measures._governance`).

Each track is a function of an adapter (plus, where the spec needs it, white-box access or a
no-r ablation) and traces, returning JSON-serialisable figures with intervals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

if TYPE_CHECKING:
    from trustbench.trb.measures._calls import AblationUnsupported, act_many, emit_many
    from trustbench.trb.measures._grounding import concept_directions, grounding, mann_whitney_auc
    from trustbench.trb.measures._navigability import navigability, steering_report
    from trustbench.trb.measures._rollout import Start, exact_reach, reach, sampled_reach
    from trustbench.trb.measures._transfer import TRANSFER_FAMILIES, family_splits, transfer
    from trustbench.trb.measures._viability import viability
    from trustbench.trb.measures._whitebox import ReferenceWhiteBox, WhiteBox, capture, inject

__all__ = [
    "TRANSFER_FAMILIES",
    "AblationUnsupported",
    "ReferenceWhiteBox",
    "Start",
    "WhiteBox",
    "act_many",
    "capture",
    "concept_directions",
    "emit_many",
    "exact_reach",
    "family_splits",
    "grounding",
    "inject",
    "mann_whitney_auc",
    "navigability",
    "reach",
    "sampled_reach",
    "steering_report",
    "transfer",
    "viability",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
