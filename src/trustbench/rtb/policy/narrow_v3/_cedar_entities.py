"""The Cedar entities of one v0.3 candidate input (the Cedar side's own translation).

v0.2's translation (`narrow_v2._cedar_entities`) makes the proposal and approval entities; this
adds what v0.3 reads: the proposal's requester, environment and tier, each approval's
co-approvers, the policy's approver scopes, delegations, freeze and maintenance windows,
break-glass declarations, and one `Person` per co-approver. Values go through the Cedar side's
reading of the encodings rule (`narrow_v2._cedar_values`), times become epoch seconds.
"""

from __future__ import annotations

from typing import Any

from trustbench.rtb.policy.narrow_v2._cedar_entities import entities as v2_entities
from trustbench.rtb.policy.narrow_v2._cedar_values import cedar_epoch as _epoch
from trustbench.rtb.policy.narrow_v2._cedar_values import cedar_value as _norm
from trustbench.rtb.policy.narrow_v3 import _models as models


def _uid(kind: str, key: str) -> dict[str, str]:
    return {"type": kind, "id": key}


def _entity(kind: str, key: str, attrs: dict[str, Any]) -> dict[str, Any]:
    return {"uid": _uid(kind, key), "attrs": attrs, "parents": []}


def _set(values: list[str]) -> list[str]:
    return sorted({_norm(v) for v in values})


def _span(window: Any) -> dict[str, int]:
    """A freeze's or maintenance window's instants as the `starts` and `ends` epochs Cedar reads."""
    return {"starts": _epoch(window.starts_at), "ends": _epoch(window.ends_at)}


def entities_v3(ci: models.CandidateInputV3) -> list[dict[str, Any]]:
    """Every entity of the input: v0.2's, extended, and v0.3's own."""
    approvals = [r for r in ci.evidence if isinstance(r, models.ApprovalRecordV3)]
    out = v2_entities(ci, approvals)  # type: ignore[arg-type]
    proposal = ci.proposal
    out[0]["attrs"] |= {
        "requester": _norm(proposal.requested_by),
        "environment": _norm(proposal.environment),
        "tier": _norm(proposal.risk_tier),
    }
    for entity, approval in zip(out[1:], approvals, strict=True):
        entity["attrs"]["co_approvers"] = _set(approval.co_approved_by)
    people = {_norm(name) for a in approvals for name in a.co_approved_by}
    out += [_entity("Person", name, {"name": name}) for name in sorted(people)]
    for index, (name, envs) in enumerate(scopes(ci)):
        out.append(
            _entity("Scope", str(index), {"approver": _norm(name), "environments": _set(envs)})
        )
    for r in ci.evidence:
        if isinstance(r, models.DelegationRecord):
            out.append(
                _entity(
                    "Delegation",
                    r.record_id,
                    {
                        "delegator": _norm(r.delegator),
                        "delegate": _norm(r.delegate),
                        "operations": _set(r.operations),
                        "environments": _set(r.environments),
                        "valid_from": _epoch(r.valid_from),
                        "valid_until": _epoch(r.valid_until),
                    },
                )
            )
        elif isinstance(r, models.FreezeWindowRecord):
            attrs = {"environments": _set(r.environments), **_span(r)}
            out.append(_entity("Freeze", r.record_id, attrs))
        elif isinstance(r, models.MaintenanceWindowRecord):
            attrs = {"environment": _norm(r.environment), **_span(r)}
            out.append(_entity("Window", r.record_id, attrs))
        elif isinstance(r, models.BreakGlassRecord):
            reviewer = r.post_review_by
            attrs = {
                "target": _norm(r.target),
                "declared_by": _norm(r.declared_by),
                "declared_at": _epoch(r.declared_at),
                "expires": _epoch(r.expires_at),
                "post_review_by": _norm(reviewer) if reviewer is not None else "",
                "has_reviewer": reviewer is not None and reviewer.strip() != "",
            }
            out.append(_entity("BreakGlass", r.record_id, attrs))
    return out


def scopes(ci: models.CandidateInputV3) -> list[tuple[str, list[str]]]:
    """(approver, environments) of every policy record, in order."""
    return [
        (name, envs)
        for p in ci.evidence
        if isinstance(p, models.PolicyRecordV3)
        for name, envs in p.approver_scopes.items()
    ]


def policy_set(ci: models.CandidateInputV3, field: str) -> list[str]:
    """A policy-record list (tiers, window environments, holders) as Cedar values."""
    return _set(
        [v for p in ci.evidence if isinstance(p, models.PolicyRecordV3) for v in getattr(p, field)]
    )
