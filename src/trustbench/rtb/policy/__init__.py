"""Corpus policies: one object per corpus version owns everything version-specific.

A corpus declares its policy id (`MANIFEST.json` `policy_id`; none: `DEFAULT_POLICY_ID`).
`policy_for(id)` gives the registered `CorpusPolicy`; `policy_of(case_or_input)` finds the policy
of a model instance. Built in: `narrow_v1` (`rtb-narrow-approval-v1`, the first starter corpus),
`narrow_v2` (`rtb-narrow-approval-v2`), `narrow_v3` and `narrow_v4`; a plug-in adds its own with
`register_policy` (`unregister_policy` removes it). See CONTRIBUTING.md, "Add a corpus version".
"""

from __future__ import annotations

from trustbench.rtb.policy._default import DEFAULT_POLICY_ID
from trustbench.rtb.policy._protocol import (
    AuthoredCase,
    CandidateInput,
    CaseGenerator,
    CorpusPolicy,
    FaultApproval,
    LiveEvaluator,
    ReviewFinding,
)
from trustbench.rtb.policy._registry import (
    known_policy_ids,
    parse_candidate_input,
    policy_for,
    policy_of,
    register_policy,
    registered_policies,
    require_policy,
    unregister_policy,
)

__all__ = [
    "DEFAULT_POLICY_ID",
    "AuthoredCase",
    "CandidateInput",
    "CaseGenerator",
    "CorpusPolicy",
    "FaultApproval",
    "LiveEvaluator",
    "ReviewFinding",
    "known_policy_ids",
    "parse_candidate_input",
    "policy_for",
    "policy_of",
    "register_policy",
    "registered_policies",
    "require_policy",
    "unregister_policy",
]
