"""Policy `rtb-narrow-approval-v3` evaluated by Cedar on one candidate input.

The second, independent encoding of the v0.3 rule table: the v0.2 Cedar policies (the rules v0.3
keeps) and `approval_policy.cedar` (what v0.3 adds) in one policy set. It shares no normaliser or
decision helper with the reference reviewer: values are read by the Cedar side's own reading of
the encodings rule (`narrow_v2._cedar`), entities are built in this module. Cedar
decides which approvers are authorised (scopes, delegations), which windows are open, whether a
break-glass is valid, which approval governs and every prohibition; this module asks, counts what
Cedar allowed, and applies precedence to the `@decision` annotations of the policies that fired.
Any Cedar error fails closed (hold).
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import cedarpy

from trustbench.rtb.corpus._models import Decision, ServiceNoticeRecord
from trustbench.rtb.policy.narrow_v2._cedar import (
    CedarFinding,
    ask_cedar,
    load_policy_text_v2,
    precedence,
)
from trustbench.rtb.policy.narrow_v2._cedar import cedar_epoch as _epoch
from trustbench.rtb.policy.narrow_v2._cedar import cedar_request as _request
from trustbench.rtb.policy.narrow_v2._cedar import cedar_value as _norm
from trustbench.rtb.policy.narrow_v2._cedar import entities as v2_entities
from trustbench.rtb.policy.narrow_v3 import _models as models

# ------------------------------------------------------------------------------------------------
# The Cedar entities of one v0.3 candidate input (the Cedar side's own translation).
#
# v0.2's translation (`narrow_v2._cedar`) makes the proposal and approval entities; this
# adds what v0.3 reads: the proposal's requester, environment and tier, each approval's
# co-approvers, the policy's approver scopes, delegations, freeze and maintenance windows,
# break-glass declarations, and one `Person` per co-approver. Values go through the Cedar side's
# reading of the encodings rule (`narrow_v2._cedar`), times become epoch seconds.


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


_PROPOSAL = {"type": "Proposal", "id": "proposal"}


@cache
def policy_text_v3_cedar() -> str:
    """The v0.2 policies and the v0.3 additions, as one Cedar policy set."""
    added = (
        resources.files("trustbench.rtb.policy.narrow_v3")
        .joinpath("approval_policy.cedar")
        .read_text(encoding="utf-8")
    )
    return load_policy_text_v2() + "\n" + added


def _ask(requests: list[dict], entities: list[dict]) -> list[Any]:
    return ask_cedar(requests, policy_text_v3_cedar(), entities)


def _allowed(requests: list[dict], entities: list[dict]) -> list[bool]:
    return [r.decision == cedarpy.Decision.Allow for r in _ask(requests, entities)]


def cedar_assess_v3(ci: models.CandidateInputV3) -> CedarFinding:
    """Decide one v0.3 candidate input with the Cedar encoding of the policy."""
    try:
        return _assess(ci)
    except Exception as error:  # any engine or translation failure fails closed
        return CedarFinding(Decision.HOLD, (models.ReasonCodeV3.INSUFFICIENT_EVIDENCE,), str(error))  # type: ignore[arg-type]


def _ids(kind: type, ci: models.CandidateInputV3) -> list[str]:
    return [r.record_id for r in ci.evidence if isinstance(r, kind)]


def _authorised(ci: models.CandidateInputV3, entities: list[dict]) -> list[str]:
    scoped = scopes(ci)
    hits = _allowed(
        [
            _request({"type": "Scope", "id": str(i)}, "scoped", _PROPOSAL)
            for i in range(len(scoped))
        ],
        entities,
    )
    direct = sorted({_norm(name) for (name, _), ok in zip(scoped, hits, strict=True) if ok})
    delegations = [r for r in ci.evidence if isinstance(r, models.DelegationRecord)]
    hits = _allowed(
        [
            _request(
                {"type": "Delegation", "id": d.record_id},
                "delegates",
                _PROPOSAL,
                {"direct": direct},
            )
            for d in delegations
        ],
        entities,
    )
    return sorted(
        {*direct, *(_norm(d.delegate) for d, ok in zip(delegations, hits, strict=True) if ok)}
    )


def _count(
    kind: type,
    entity: str,
    action: str,
    ci: models.CandidateInputV3,
    entities: list[dict],
    context: dict | None = None,
) -> int:
    ids = _ids(kind, ci)
    return sum(
        _allowed(
            [_request({"type": entity, "id": i}, action, _PROPOSAL, context) for i in ids], entities
        )
    )


def _assess(ci: models.CandidateInputV3) -> CedarFinding:
    entities = entities_v3(ci)
    approvals = [r for r in ci.evidence if isinstance(r, models.ApprovalRecordV3)]
    authorised = _authorised(ci, entities)
    glass = (
        _count(
            models.BreakGlassRecord,
            "BreakGlass",
            "lifts",
            ci,
            entities,
            {"holders": policy_set(ci, "break_glass_holders")},
        )
        > 0
    )
    gate = {
        "break_glass": glass,
        "freeze_count": _count(models.FreezeWindowRecord, "Freeze", "freezes", ci, entities),
        "open_windows": _count(models.MaintenanceWindowRecord, "Window", "opens", ci, entities),
        "window_environments": policy_set(ci, "window_environments"),
    }
    fired = _ask([_request(_PROPOSAL, "gate", _PROPOSAL, gate)], entities)
    applies = _allowed(
        [
            _request({"type": "Approval", "id": a.record_id}, "applies", _PROPOSAL)
            for a in approvals
        ],
        entities,
    )
    applicable = [a for a, ok in zip(approvals, applies, strict=True) if ok]
    if not applicable:
        unavailable = any(
            isinstance(r, ServiceNoticeRecord) and r.service.strip() == "approval-service"
            for r in ci.evidence
        )
        context = {"approval_service_unavailable": unavailable, "approval_count": len(approvals)}
        fired += _ask([_request(_PROPOSAL, "no_applicable_approval", _PROPOSAL, context)], entities)
        return _precedence(fired)
    pairs = [(b, a) for b in applicable for a in applicable if a is not b]
    answers = _allowed(
        [
            _request(
                {"type": "Approval", "id": b.record_id},
                "supersedes",
                {"type": "Approval", "id": a.record_id},
            )
            for b, a in pairs
        ],
        entities,
    )
    superseded = {a.record_id for (_, a), ok in zip(pairs, answers, strict=True) if ok}
    governing = [a for a in applicable if a.record_id not in superseded]
    gov = governing[0]
    people = sorted({_norm(name) for name in gov.co_approved_by})
    second = sum(
        _allowed(
            [
                _request(
                    {"type": "Person", "id": p},
                    "countersigns",
                    {"type": "Approval", "id": gov.record_id},
                    {"authorised": authorised},
                )
                for p in people
            ],
            entities,
        )
    )
    revisions = sorted(
        {
            _norm(s.revision)
            for s in ci.evidence
            if isinstance(s, models.ResourceStateRecordV2)
            and _norm(s.resource_id) == _norm(ci.proposal.target)
        }
    )
    context = {
        "authorised_approvers": authorised,
        "governing_count": len(governing),
        "state_count": len(revisions),
        "state_revision": revisions[0] if len(revisions) == 1 else "",
        "break_glass": glass,
        "two_person_tiers": policy_set(ci, "two_person_tiers"),
        "second_count": second,
    }
    fired += _ask(
        [_request({"type": "Approval", "id": gov.record_id}, "assess", _PROPOSAL, context)],
        entities,
    )
    return _precedence(fired)


def _precedence(results: list[Any]) -> CedarFinding:
    """Deny outranks hold, hold outranks permit; nothing fired is hold."""
    return precedence(
        results,
        policy_text_v3_cedar(),
        models.ReasonCodeV3,
        models.ReasonCodeV3.INSUFFICIENT_EVIDENCE,
    )
