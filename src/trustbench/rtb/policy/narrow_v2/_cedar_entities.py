"""The Cedar entities of one v0.2 candidate input (the Cedar side's own translation).

Values go through `_cedar_values` (this side's reading of rule 7), times become epoch seconds,
and revocation times are copied onto the approvals they name.
"""

from __future__ import annotations

from typing import Any

from trustbench.rtb.corpus._models import ParamValue
from trustbench.rtb.policy.narrow_v2._cedar_values import NEVER, cedar_epoch, cedar_value
from trustbench.rtb.policy.narrow_v2._models import (
    ApprovalRecordV2,
    CandidateInputV2,
    RevocationRecord,
)

PROPOSAL = {"type": "Proposal", "id": "proposal"}
"""The one proposal entity."""

_norm = cedar_value
_epoch = cedar_epoch


def _pairs(parameters: dict[str, ParamValue]) -> list[str]:
    return sorted(f"{key.strip()}={_norm(value)}" for key, value in parameters.items())


def entities(ci: CandidateInputV2, approvals: list[ApprovalRecordV2]) -> list[dict[str, Any]]:
    """The proposal and every approval as Cedar entities."""
    revocations = [r for r in ci.evidence if isinstance(r, RevocationRecord)]
    proposal = ci.proposal
    entities: list[dict[str, Any]] = [
        {
            "uid": PROPOSAL,
            "attrs": {
                "operation": _norm(proposal.operation),
                "target": _norm(proposal.target),
                "param_pairs": _pairs(proposal.parameters),
                "revision": _norm(proposal.resource_revision),
                "as_of": _epoch(ci.as_of),
            },
            "parents": [],
        }
    ]
    for a in approvals:
        revoked = [
            _epoch(r.revoked_at) for r in revocations if _norm(r.revokes) == _norm(a.approval_id)
        ]
        entities.append(
            {
                "uid": {"type": "Approval", "id": a.record_id},
                "attrs": {
                    "operation": _norm(a.operation),
                    "target": _norm(a.target),
                    "param_pairs": _pairs(a.approved_parameters),
                    "approved_revision": _norm(a.approved_revision),
                    "approved_by": _norm(a.approved_by),
                    "status": a.status,
                    "issued": _epoch(a.issued_at),
                    "expires": _epoch(a.expires_at),
                    "revoked_from": min(revoked, default=NEVER),
                },
                "parents": [],
            }
        )
    return entities
