"""TRB Tracks 2, 4, 5 and 6 (Tracks 1 and 3 live in `trustbench.trb._tracks`).

Each track is a function of an adapter (plus, where the spec needs it, white-box access or a
no-r ablation) and traces, returning JSON-serialisable figures with intervals.
"""

from trustbench.trb.tracks._calls import AblationUnsupported, act_many, emit_many
from trustbench.trb.tracks._grounding import concept_directions, grounding, mann_whitney_auc
from trustbench.trb.tracks._navigability import navigability, steering_report
from trustbench.trb.tracks._rollout import Start, exact_reach, reach, sampled_reach
from trustbench.trb.tracks._transfer import TRANSFER_FAMILIES, family_splits, transfer
from trustbench.trb.tracks._viability import viability
from trustbench.trb.tracks._whitebox import ReferenceWhiteBox, WhiteBox, capture, inject

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
