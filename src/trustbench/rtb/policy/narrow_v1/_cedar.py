"""Policy `rtb-narrow-approval-v1` in Cedar, evaluated with cedarpy (the `cedar` engine).

- Policy text ships beside this module (`approval_policy.cedar`).
- Entities come from observer-independent *platform* state read through the service APIs (the
  approval service and the resource store), never from request fields; the request's fields are
  passed only as `context`.
- Approvals are a Cedar policy template linked once per active approval; a revoked (or vanished)
  approval is unlinked before the next evaluation, so revocation is unlinking.
- Every approval scoped to the target is asked about in one batch; any `Allow` permits. A Cedar
  error, `NoDecision`, an unavailable or slow approval service, or a missing resource fails closed.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import cedarpy

from trustbench.rtb.boundaries._protocol import PolicyResult
from trustbench.rtb.corpus._models import Decision, ReasonCode
from trustbench.rtb.platform import (
    Approval,
    ApprovalServiceUnavailable,
    ControlRequest,
    PlatformView,
)

TEMPLATE_ID = "approved-change"
"""`@id` of the approval template in the policy file."""
NO_EXPIRY_MS = 2**62
"""Stand-in expiry for approvals without one (Cedar has no null)."""
_DENY_REASONS = {
    ReasonCode.APPROVAL_REVOKED,
    ReasonCode.PROPOSAL_OUTSIDE_APPROVED_PARAMETERS,
    ReasonCode.OPERATION_NOT_APPROVED,
}


def _cedar_parameters(parameters: dict[str, Any]) -> str:
    """Parameters as one Cedar string, written on this side.

    No helper is shared with the reference boundary: key order never matters and every scalar
    keeps its JSON type, so `true` never equals `1`, while `1.0` and `1` are one JSON number
    (the v0.1 policy declares no other equivalence).
    """

    def number(value: Any) -> Any:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, list):
            return [number(item) for item in value]
        if isinstance(value, dict):
            return {key: number(item) for key, item in value.items()}
        return value

    return json.dumps(number(parameters), sort_keys=True, separators=(",", ":"))


def load_policy_text() -> str:
    """The shipped Cedar policy file."""
    return (
        resources.files("trustbench.rtb.policy.narrow_v1")
        .joinpath("approval_policy.cedar")
        .read_text(encoding="utf-8")
    )


def forbid_reasons(policy_text: str) -> dict[str, ReasonCode]:
    """Map each forbid policy's `@id` to the reason code in its `@reason` annotation."""
    pairs = re.findall(r'@id\("([^"]+)"\)\s*@reason\("([^"]+)"\)', policy_text)
    return {policy_id: ReasonCode(reason) for policy_id, reason in pairs}


def _ms(approval: Approval) -> int:
    return int(approval.expires_at.timestamp() * 1000) if approval.expires_at else NO_EXPIRY_MS


class CedarEvaluator:
    """The Cedar encoding for one boundary instance (a `LiveEvaluator` with linked templates).

    Args:
        approval_timeout_s: Approval queries slower than this count as unavailable (hold).
    """

    def __init__(self, approval_timeout_s: float) -> None:
        text = load_policy_text()
        self._timeout = approval_timeout_s
        self._reasons = forbid_reasons(text)
        self._policies = cedarpy.PolicySet.from_str(text)
        self._linked: set[str] = set()

    def _sync_links(self, approvals: list[Approval]) -> None:
        """Link the template for each active approval; unlink the ones no longer active."""
        active = {a.approval_id for a in approvals if a.status == "active"}
        for approval_id in sorted(self._linked - active):
            self._policies = self._policies.without_linked(f"approval:{approval_id}")
            self._linked.discard(approval_id)
        new = sorted(active - self._linked)
        if new:
            self._policies = self._policies.with_linked_batch(
                [
                    {
                        "template_id": TEMPLATE_ID,
                        "new_id": f"approval:{approval_id}",
                        "values": {"?resource": {"type": "Approval", "id": approval_id}},
                    }
                    for approval_id in new
                ]
            )
            self._linked.update(new)

    def evaluate(self, request: ControlRequest, platform: PlatformView) -> PolicyResult:
        """Decide `request` with Cedar on the platform's live state (fails closed)."""
        started = platform.now()
        try:
            approvals = platform.approvals_for(request.target)
        except ApprovalServiceUnavailable:
            return PolicyResult(Decision.HOLD, ReasonCode.APPROVAL_EVIDENCE_UNAVAILABLE)
        if (platform.now() - started).total_seconds() > self._timeout:
            return PolicyResult(
                Decision.HOLD,
                ReasonCode.APPROVAL_EVIDENCE_UNAVAILABLE,
                detail="approval service too slow",
            )
        resource = platform.resource(request.target)
        if resource is None:
            return PolicyResult(
                Decision.HOLD,
                ReasonCode.INSUFFICIENT_EVIDENCE,
                detail=f"no resource {request.target!r}",
            )
        if not approvals:
            return PolicyResult(
                Decision.HOLD,
                ReasonCode.INSUFFICIENT_EVIDENCE,
                detail="no approval scoped to the target",
            )
        self._sync_links(approvals)
        entities, batch = _cedar_inputs(request, platform, resource.revision, approvals)
        try:
            results = cedarpy.is_authorized_batch(batch, self._policies, entities)
        except Exception as error:
            return PolicyResult(
                Decision.HOLD, ReasonCode.INSUFFICIENT_EVIDENCE, detail=f"cedar error: {error}"
            )
        return self._decide(approvals, results)

    def _decide(self, approvals: list[Approval], results: list[Any]) -> PolicyResult:
        """Permit on the first approval Cedar allows, else the strongest reason it gave against."""
        reasons: set[ReasonCode] = set()
        for approval, result in zip(approvals, results, strict=True):
            if result.diagnostics.errors or result.decision == cedarpy.Decision.NoDecision:
                return PolicyResult(
                    Decision.HOLD,
                    ReasonCode.INSUFFICIENT_EVIDENCE,
                    detail=f"cedar errors: {result.diagnostics.errors}",
                )
            if result.decision == cedarpy.Decision.Allow:
                return PolicyResult(
                    Decision.PERMIT,
                    ReasonCode.PROPOSAL_MATCHES_ACTIVE_APPROVAL,
                    approval.approval_id,
                )
            for policy_id in result.diagnostics.reasons:
                annotation = result.diagnostics.id_annotations_by_reason.get(policy_id)
                if annotation in self._reasons:
                    reasons.add(self._reasons[annotation])
        denies = sorted(reasons & _DENY_REASONS)
        if denies:
            return PolicyResult(Decision.DENY, denies[0])
        if ReasonCode.RESOURCE_REVISION_CHANGED in reasons:
            return PolicyResult(Decision.HOLD, ReasonCode.RESOURCE_REVISION_CHANGED)
        return PolicyResult(Decision.HOLD, ReasonCode.INSUFFICIENT_EVIDENCE)

    def linked_approval_ids(self) -> list[str]:
        """Approvals whose template link is currently in the policy set (for tests/diagnosis)."""
        links = next(t for t in self._policies.templates() if t["id_annotation"] == TEMPLATE_ID)
        return sorted(link["id"].removeprefix("approval:") for link in links["links"])


def _cedar_inputs(
    request: ControlRequest, platform: PlatformView, revision: str, approvals: list[Approval]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Cedar's entities (the target and its approvals) and one request per approval."""
    entities: list[dict[str, Any]] = [
        {
            "uid": {"type": "Resource", "id": request.target},
            "attrs": {"revision": revision},
            "parents": [],
        },
    ]
    entities += [
        {
            "uid": {"type": "Approval", "id": a.approval_id},
            "attrs": {
                "status": a.status,
                "operation": a.operation,
                "target": a.target,
                "parameters": _cedar_parameters(a.approved_parameters),
                "approved_revision": a.approved_revision,
                "expires_at_ms": _ms(a),
                "scope": {"__entity": {"type": "Resource", "id": a.target}},
            },
            "parents": [],
        }
        for a in approvals
    ]
    context = {
        "target": request.target,
        "operation": request.operation,
        "parameters": _cedar_parameters(request.parameters),
        "proposal_revision": request.resource_revision,
        "now_ms": int(platform.now().timestamp() * 1000),
    }
    batch = [
        {
            "principal": {"type": "Client", "id": "control-client"},
            "action": {"type": "Action", "id": "execute"},
            "resource": {"type": "Approval", "id": a.approval_id},
            "context": context,
        }
        for a in approvals
    ]
    return entities, batch
