"""Policy `rtb-narrow-approval-v3` evaluated by Cedar on one candidate input.

The second, independent encoding of the v0.3 rule table: the v0.2 Cedar policies (the rules v0.3
keeps) and `approval_policy.cedar` (what v0.3 adds) in one policy set. It shares no normaliser or
decision helper with the reference reviewer: values are read by the Cedar side's own reading of
the encodings rule (`narrow_v2._cedar_values`), entities are built in `_cedar_entities`. Cedar
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
from trustbench.rtb.policy.narrow_v2._cedar import cedar_request as _request
from trustbench.rtb.policy.narrow_v2._cedar_values import cedar_value as _norm
from trustbench.rtb.policy.narrow_v3 import _models as models
from trustbench.rtb.policy.narrow_v3._cedar_entities import entities_v3, policy_set, scopes

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
