"""Policy `rtb-narrow-approval-v2` evaluated by Cedar on one candidate input.

The second, independent encoding of the v0.2 policy text (`policies/approval_policy_v2.cedar`);
a test requires it, `reference-policy-v2` and the authored answer key to agree on every v0.2
case. It shares no normalisation or decision helper with the reference reviewer: values are
read by this side's own reading of rule 7 and entities are built here, in this module, which
asks Cedar and applies rule 6 (precedence) to the `@decision` annotations of the policies that
fired. Which approval governs, and whether it
permits, is decided by Cedar. Any Cedar error fails closed (hold).
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any

import cedarpy

from trustbench.rtb.corpus._models import Decision, ParamValue, ServiceNoticeRecord
from trustbench.rtb.policy.narrow_v2 import _models as models
from trustbench.rtb.policy.narrow_v2._models import (
    ApprovalRecordV2,
    CandidateInputV2,
    RevocationRecord,
)

# ------------------------------------------------------------------------------------------------
# Values as the Cedar encoding sees them: rule 7 of the v0.2 policy text, written on this side.
#
# The Cedar encoding must be able to contradict the reference reviewer, so it shares no
# normalisation or decision helper with it (`trustbench.rtb.corpus._normalise` is the reference
# side's). This module reads rule 7 of the policy text on its own:
#
#     Values compare after normalisation: a string holding a base-10 integer equals that integer
#     ("22" equals 22; booleans never equal numbers); strings are trimmed of surrounding
#     whitespace; a DNS name compares case-insensitively and without its trailing dot; a list
#     compares as the sorted list of its normalised items.
#
# "A DNS name" is read as a host name (RFC 1123): two or more dot-separated labels of ASCII
# letters, digits and hyphens, no label empty or starting or ending with a hyphen, the last label
# (the top-level domain) letters only; one trailing root dot allowed. So `Api.Example.com.` is
# `api.example.com`, while a version string (`V14.1`, `release_2.0`) is not a DNS name and keeps
# its case. Every value becomes one Cedar string (a typed JSON text), so equal strings in Cedar are
# exactly equivalent values under rule 7.

NEVER = 2**62
"""Stand-in epoch for "no expiry" / "never revoked" (Cedar has no null)."""

_LABEL_CHARS = frozenset(string.ascii_letters + string.digits + "-")


def _is_host_name(text: str) -> bool:
    """Whether `text` (trimmed) is a DNS host name in the reading above."""
    name = text[:-1] if text.endswith(".") else text
    labels = name.split(".")
    if len(labels) < 2:
        return False
    for label in labels:
        if not label or len(label) > 63 or label[0] == "-" or label[-1] == "-":
            return False
        if not set(label) <= _LABEL_CHARS:
            return False
    return labels[-1].isascii() and labels[-1].isalpha()


def _is_integer_text(text: str) -> bool:
    body = text[1:] if text[:1] in "+-" else text
    return body.isascii() and body.isdigit()


def _canonical(value: Any) -> Any:
    """A tagged canonical form: equal forms are equivalent values under rule 7."""
    if isinstance(value, bool):
        return ["bool", value]
    if value is None:
        return ["null", None]
    if isinstance(value, int):
        return ["int", value]
    if isinstance(value, float):
        return ["float", value]
    if isinstance(value, str):
        text = value.strip()
        if _is_integer_text(text):
            return ["int", int(text)]
        if _is_host_name(text):
            return ["str", text.rstrip(".").lower()]
        return ["str", text]
    if isinstance(value, list | tuple):
        items = [_canonical(item) for item in value]
        return ["list", sorted(items, key=lambda item: json.dumps(item, sort_keys=True))]
    return ["other", repr(value)]


def cedar_value(value: Any) -> str:
    """The Cedar string standing for `value` (equal strings = equivalent values)."""
    return json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"))


def cedar_epoch(text: str | None) -> int:
    """An ISO 8601 instant as epoch seconds (`NEVER` for none)."""
    if text is None:
        return NEVER
    return int(datetime.fromisoformat(text.strip().replace("Z", "+00:00")).timestamp())


# ------------------------------------------------------------------------------------------------
# The Cedar entities of one v0.2 candidate input (the Cedar side's own translation).
#
# Values go through this module (this side's reading of rule 7), times become epoch seconds,
# and revocation times are copied onto the approvals they name.

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


_PROPOSAL = PROPOSAL
_entities = entities
_norm = cedar_value

POLICY_IDS: tuple[str, ...] = (models.POLICY_ID_V2,)
"""Policies this encoding implements."""


@dataclass(frozen=True)
class CedarFinding:
    """Cedar's decision with the reason codes of the policies that fired at that level."""

    decision: Decision
    """permit, deny or hold."""
    reason_codes: tuple[models.ReasonCodeV2, ...]
    """Reasons at the decisive precedence level."""
    detail: str = ""
    """Why Cedar failed closed, when it did."""


@cache
def load_policy_text_v2() -> str:
    """The shipped v0.2 Cedar policy file."""
    return (
        resources.files("trustbench.rtb.policy.narrow_v2")
        .joinpath("approval_policy.cedar")
        .read_text(encoding="utf-8")
    )


@cache
def policy_annotations(policy_text: str) -> dict[str, tuple[str, str]]:
    """Policy `@id` -> (`@decision`, `@reason`) of a Cedar policy set (v0.3's extends v0.2's)."""
    pairs = re.findall(
        r'@id\("([^"]+)"\)\s*@decision\("([^"]+)"\)\s*@reason\("([^"]+)"\)', policy_text
    )
    return {pid: (decision, reason) for pid, decision, reason in pairs}


def cedar_request(
    principal: dict, action: str, resource: dict, context: dict | None = None
) -> dict:
    """One request of a Cedar batch."""
    return {
        "principal": principal,
        "action": {"type": "Action", "id": action},
        "resource": resource,
        "context": context or {},
    }


def _approval(record_id: str) -> dict[str, str]:
    return {"type": "Approval", "id": record_id}


def cedar_assess_v2(ci: models.CandidateInputV2) -> CedarFinding:
    """Decide one v0.2 candidate input with the Cedar encoding of the policy."""
    try:
        return _assess(ci)
    except Exception as error:  # any engine or translation failure fails closed
        return CedarFinding(Decision.HOLD, (models.ReasonCodeV2.INSUFFICIENT_EVIDENCE,), str(error))


@cache
def _policy_set(policy_text: str) -> cedarpy.PolicySet:
    """`policy_text` parsed once (an immutable handle; a text that fails to parse raises each time).

    cedarpy parses a policy text given as a string on every call: a workflow run asks Cedar at
    every live proposal, and a batch took 1.61 ms of CPU with the text against 0.43 ms with
    the parsed set (v0.2's policies, load 15; bench/README.md "Reviewers in the loop").
    """
    return cedarpy.PolicySet.from_str(policy_text)


def ask_cedar(
    requests: list[dict], policy_text: str, entities: list[dict]
) -> list[cedarpy.AuthzResult]:
    """Cedar's answers to a batch; any diagnostic error raises (the caller fails closed)."""
    if not requests:
        return []
    results = cedarpy.is_authorized_batch(requests, _policy_set(policy_text), entities)
    for result in results:
        if result.diagnostics.errors:
            raise RuntimeError(f"cedar errors: {result.diagnostics.errors}")
    return results


def _ask(requests: list[dict], entities: list[dict]) -> list[cedarpy.AuthzResult]:
    return ask_cedar(requests, load_policy_text_v2(), entities)


def _assess(ci: models.CandidateInputV2) -> CedarFinding:
    approvals = [r for r in ci.evidence if isinstance(r, models.ApprovalRecordV2)]
    entities = _entities(ci, approvals)
    applies = _ask(
        [cedar_request(_approval(a.record_id), "applies", _PROPOSAL) for a in approvals], entities
    )
    applicable = [
        a.record_id
        for a, r in zip(approvals, applies, strict=True)
        if r.decision == cedarpy.Decision.Allow
    ]
    if not applicable:
        unavailable = any(
            isinstance(r, ServiceNoticeRecord) and r.service.strip() == "approval-service"
            for r in ci.evidence
        )
        context = {"approval_service_unavailable": unavailable, "approval_count": len(approvals)}
        ask = cedar_request(_PROPOSAL, "no_applicable_approval", _PROPOSAL, context)
        fired = _ask([ask], entities)
        return _precedence(fired)
    pairs = [(b, a) for b in applicable for a in applicable if a != b]
    superseded = set()
    if pairs:
        answers = _ask(
            [cedar_request(_approval(b), "supersedes", _approval(a)) for b, a in pairs], entities
        )
        superseded = {
            a
            for (b, a), r in zip(pairs, answers, strict=True)
            if r.decision == cedarpy.Decision.Allow
        }
    governing = [record_id for record_id in applicable if record_id not in superseded]
    states = [
        r
        for r in ci.evidence
        if isinstance(r, models.ResourceStateRecordV2)
        and _norm(r.resource_id) == _norm(ci.proposal.target)
    ]
    revisions = sorted({_norm(s.revision) for s in states})
    approvers = sorted(
        {
            _norm(name)
            for p in ci.evidence
            if isinstance(p, models.PolicyRecordV2)
            for name in p.authorised_approvers
        }
    )
    context = {
        "authorised_approvers": approvers,
        "governing_count": len(governing),
        "state_count": len(revisions),
        "state_revision": revisions[0] if len(revisions) == 1 else "",
    }
    fired = _ask([cedar_request(_approval(governing[0]), "assess", _PROPOSAL, context)], entities)
    return _precedence(fired)


def _precedence(results: list[cedarpy.AuthzResult]) -> CedarFinding:
    return precedence(
        results,
        load_policy_text_v2(),
        models.ReasonCodeV2,
        models.ReasonCodeV2.INSUFFICIENT_EVIDENCE,
    )


def precedence(
    results: list[cedarpy.AuthzResult],
    policy_text: str,
    reason_code: Callable[[str], Any],
    insufficient: Any,
) -> CedarFinding:
    """Rule 6: deny outranks hold, hold outranks permit; nothing fired is hold (`insufficient`).

    Args:
        results: Cedar's answers; the policies that allowed one fired.
        policy_text: The policy set asked (its `@decision` / `@reason` annotations).
        reason_code: The policy's reason-code type (`@reason` text -> code).
        insufficient: Its insufficient-evidence code.
    """
    annotations = policy_annotations(policy_text)
    fired: dict[str, list[Any]] = {}
    for result in results:
        if result.decision != cedarpy.Decision.Allow:
            continue
        for policy in result.diagnostics.reasons:
            key = result.diagnostics.id_annotations_by_reason.get(policy, policy)
            decision, reason = annotations[key]
            if decision != "none":  # a helper policy (which approval applies), no verdict
                fired.setdefault(decision, []).append(reason_code(reason))
    for level in (Decision.DENY, Decision.HOLD, Decision.PERMIT):
        if level.value in fired:
            return CedarFinding(level, tuple(dict.fromkeys(fired[level.value])))
    return CedarFinding(Decision.HOLD, (insufficient,), "no policy fired")
