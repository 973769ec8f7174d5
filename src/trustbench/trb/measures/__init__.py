"""TRB Tracks 2, 4, 5 and 6, and Tracks 1 and 3's rows and governance gap.

Each track is a function of an adapter (plus, where the spec needs it, white-box access or a
no-r ablation) and traces, returning JSON-serialisable figures with intervals. Tracks 1 and 3
(`governance_rows`, `attribution_rows`, their summaries) and the governance gap with its
clustered bootstrap are here too, their one public home.
"""

from __future__ import annotations

from trustbench.trb.measures._calls import AblationUnsupported, act_many, emit_many
from trustbench.trb.measures._gap import cluster_bootstrap, governance_gap
from trustbench.trb.measures._governance import (
    attribution_rows,
    governance_rows,
    summarize_attribution,
    summarize_governance,
)
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
    "attribution_rows",
    "capture",
    "cluster_bootstrap",
    "concept_directions",
    "emit_many",
    "exact_reach",
    "family_splits",
    "governance_gap",
    "governance_rows",
    "grounding",
    "inject",
    "mann_whitney_auc",
    "navigability",
    "reach",
    "sampled_reach",
    "steering_report",
    "summarize_attribution",
    "summarize_governance",
    "transfer",
    "viability",
]
