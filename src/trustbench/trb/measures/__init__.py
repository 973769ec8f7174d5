"""The counting code of TRB's tracks: Tracks 1 and 3's rows, the governance gap, the parts of 2-5.

Tracks 1 and 3 (`governance_rows`, `attribution_rows`, their summaries) and the governance gap
with its clustered bootstrap have their one public home here, with the building blocks the
other tracks are made of: batched, failure-counting adapter calls, white-box capture and
injection, concept directions and the Mann-Whitney AUC (Track 2), exact and sampled reach
(Track 5). Each track itself is one measure of the `trb/profile` track
(`trustbench.trb.track`), whose per-trace implementation the report, `trb run` and
`trustbench.trb.measure_profile` all use.
"""

from __future__ import annotations

from trustbench.trb.measures._governance import (
    AblationUnsupported,
    LlrIntervention,
    Start,
    act_many,
    attribution_rows,
    cluster_bootstrap,
    continuation_llr,
    emit_many,
    exact_reach,
    governance_gap,
    governance_rows,
    llr_governance,
    reach,
    sampled_reach,
    scores_continuations,
    summarize_attribution,
    summarize_governance,
)
from trustbench.trb.measures._grounding import (
    ReferenceWhiteBox,
    TextWhiteBox,
    TextWorldWhiteBox,
    WhiteBox,
    capture,
    concept_directions,
    inject,
    mann_whitney_auc,
)

__all__ = [
    "AblationUnsupported",
    "LlrIntervention",
    "ReferenceWhiteBox",
    "Start",
    "TextWhiteBox",
    "TextWorldWhiteBox",
    "WhiteBox",
    "act_many",
    "attribution_rows",
    "capture",
    "cluster_bootstrap",
    "concept_directions",
    "continuation_llr",
    "emit_many",
    "exact_reach",
    "governance_gap",
    "governance_rows",
    "inject",
    "llr_governance",
    "mann_whitney_auc",
    "reach",
    "sampled_reach",
    "scores_continuations",
    "summarize_attribution",
    "summarize_governance",
]
