"""Record <-> platform-state pieces every policy maps the same way (one copy, not one per policy).

An approval's terms (id, status, operation, target, parameters, revision) and a resource's state
mean the same thing under every built-in policy; what differs (expiry, approvers, issue times,
revocations) stays in each policy's own mapping.
"""

from __future__ import annotations

from typing import Any

from trustbench.rtb.platform import ResourceSeed


def approval_terms(approval: Any) -> dict[str, Any]:
    """The terms an approval record, an approval seed and a live approval share, as fields."""
    return {
        "approval_id": approval.approval_id,
        "status": approval.status,
        "operation": approval.operation,
        "target": approval.target,
        "approved_parameters": dict(approval.approved_parameters),
        "approved_revision": approval.approved_revision,
    }


def resource_seed(record: Any) -> ResourceSeed:
    """A resource-state record as the resource it describes on the simulated platform."""
    return ResourceSeed(
        resource_id=record.resource_id,
        resource_type=record.resource_type,
        revision=record.revision,
        attributes=dict(record.attributes),
    )
