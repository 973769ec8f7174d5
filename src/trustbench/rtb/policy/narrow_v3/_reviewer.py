"""The deterministic `reference-policy-v3` reviewer: policy `rtb-narrow-approval-v3` as code.

Written from the v0.3 rule table (`_rules.py`), reading only the candidate-visible input. Where
v0.3 keeps v0.2's rules (applicability, revocation, expiry, parameters, revisions, service
notices, precedence, encodings) it runs v0.2's reviewer, `assess_v2`, on a projection of the
input whose policy record lists the approvers v0.3 authorises for this proposal (approver scope
by environment, delegations in scope and in effect). The conditions v0.3 adds (separation of
duties, two-person approval, freeze and maintenance windows, break-glass) are applied on top,
and precedence combines both (deny outranks hold, hold outranks permit).

Interpretation choices, each visible below:
- Names, environments, tiers and operations compare after the policy's normalisation
  (`_normalise.equivalent`); times compare as instants.
- A discrepancy on `/approved_by` is cited only for separation of duties (approver equals the
  requester): whether a name is authorised depends on scopes and delegations, which a single
  field comparison cannot show, so v0.2's `not authorised` discrepancy is not carried over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from trustbench.rtb.corpus._discrepancy import Discrepancy
from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.corpus._normalise import equivalent
from trustbench.rtb.policy.narrow_v2 import _decision_rules as v2
from trustbench.rtb.policy.narrow_v2._models import CandidateInputV2, PolicyRecordV2
from trustbench.rtb.policy.narrow_v2._reviewer import (
    FindingV2,
    ReferencePolicyV2Reviewer,
    _raw_equal,
    assess_v2,
    finding_fields,
    instant,
)
from trustbench.rtb.policy.narrow_v3 import _decision_rules as v3
from trustbench.rtb.policy.narrow_v3._models import (
    POLICY_ID_V3,
    ApprovalRecordV3,
    BreakGlassRecord,
    CandidateInputV3,
    DelegationRecord,
    FreezeWindowRecord,
    MaintenanceWindowRecord,
    PolicyRecordV3,
    ReasonCodeV3,
)

NONE: frozenset[str] = frozenset()
"""No rule left out: the reference reading."""

Same = Callable[[object, object], bool]


def _within(start: str, end: str, at: datetime) -> bool:
    return instant(start) <= at < instant(end)


def _same(disabled: frozenset[str]) -> Same:
    """The comparison of values: normalised (rule 13), or raw when that rule is left out."""
    return _raw_equal if v2.EQUIVALENT in disabled else equivalent


def _member(value: str, values: list[str], same: Same = equivalent) -> bool:
    return any(same(value, v) for v in values)


def authorised_approvers(ci: CandidateInputV3, disabled: frozenset[str] = NONE) -> list[str]:
    """Who may approve this proposal: scoped approvers, then delegates in scope and in effect."""
    as_of, proposal, same = instant(ci.as_of), ci.proposal, _same(disabled)
    direct = [
        name
        for p in ci.evidence
        if isinstance(p, PolicyRecordV3)
        for name, environments in p.approver_scopes.items()
        if v3.SCOPE_BY_ENVIRONMENT in disabled or _member(proposal.environment, environments, same)
    ]
    delegates = [
        d.delegate
        for d in ci.evidence
        if isinstance(d, DelegationRecord)
        and v3.DELEGATION not in disabled
        and (
            v3.DELEGATION_SCOPE in disabled
            or (
                _within(d.valid_from, d.valid_until, as_of)
                and _member(d.delegator, direct, same)
                and _member(proposal.operation, d.operations, same)
                and _member(proposal.environment, d.environments, same)
            )
        )
    ]
    return direct + delegates


def _projection(ci: CandidateInputV3, authorised: list[str]) -> CandidateInputV2:
    """The input as v0.2 reads it: one policy record listing the approvers v0.3 authorises."""
    evidence: list[Any] = [
        PolicyRecordV2.model_construct(
            kind="policy",
            record_id=r.record_id,
            policy_id=r.policy_id,
            title=r.title,
            text=r.text,
            authorised_approvers=authorised,
        )
        if isinstance(r, PolicyRecordV3)
        else r
        for r in ci.evidence
    ]
    return CandidateInputV2.model_construct(
        evaluation_id=ci.evaluation_id,
        task=ci.task,
        as_of=ci.as_of,
        proposal=ci.proposal,
        evidence=evidence,
    )


def governing_approval(
    ci: CandidateInputV3, disabled: frozenset[str] = NONE
) -> ApprovalRecordV3 | None:
    """The latest applicable approval (first in presentation order on a tie), or None."""
    as_of, proposal, same = instant(ci.as_of), ci.proposal, _same(disabled)
    applicable = [
        a
        for a in ci.evidence
        if isinstance(a, ApprovalRecordV3)
        and (
            v2.SCOPE in disabled
            or (same(a.operation, proposal.operation) and same(a.target, proposal.target))
        )
        and (v2.ISSUED in disabled or instant(a.issued_at) <= as_of)
    ]
    if not applicable:
        return None
    if v2.LATEST in disabled:
        return applicable[0]
    latest = max(instant(a.issued_at) for a in applicable)
    return next(a for a in applicable if instant(a.issued_at) == latest)


def valid_break_glass(
    ci: CandidateInputV3, disabled: frozenset[str] = NONE
) -> BreakGlassRecord | None:
    """The first valid break-glass declaration for the target, or None."""
    if v3.GLASS_LIFTS in disabled:
        return None
    as_of, proposal, same = instant(ci.as_of), ci.proposal, _same(disabled)
    holders = [
        h for p in ci.evidence if isinstance(p, PolicyRecordV3) for h in p.break_glass_holders
    ]
    requester = proposal.requested_by
    for b in ci.evidence:
        if not isinstance(b, BreakGlassRecord):
            continue
        reviewer = b.post_review_by
        if same(b.target, proposal.target) and (
            v3.GLASS_VALID in disabled
            or (
                _member(b.declared_by, holders, same)
                and not same(b.declared_by, requester)
                and _within(b.declared_at, b.expires_at, as_of)
                and reviewer is not None
                and reviewer.strip() != ""
                and not same(reviewer, b.declared_by)
                and not same(reviewer, requester)
            )
        ):
            return b
    return None


def _policy_lists(ci: CandidateInputV3, field: str) -> list[str]:
    return [v for p in ci.evidence if isinstance(p, PolicyRecordV3) for v in getattr(p, field)]


def _v3_conditions(
    ci: CandidateInputV3, authorised: list[str], disabled: frozenset[str] = NONE
) -> tuple[list[tuple[ReasonCodeV3, list[str], list[Discrepancy], str]], ...]:
    """(deny, hold) conditions v0.3 adds: each (code, record ids, discrepancies, note)."""
    as_of, proposal, same = instant(ci.as_of), ci.proposal, _same(disabled)
    deny: list[tuple[ReasonCodeV3, list[str], list[Discrepancy], str]] = []
    hold: list[tuple[ReasonCodeV3, list[str], list[Discrepancy], str]] = []
    gov = governing_approval(ci, disabled)
    glass = valid_break_glass(ci, disabled)
    requester = proposal.requested_by
    signed = None if v3.SEPARATION in disabled else gov  # the approval checked for self-approval
    if signed is not None and same(signed.approved_by, requester):
        found = Discrepancy(
            record_id=signed.record_id,
            field="/approved_by",
            proposed_value=requester,
            evidence_value=signed.approved_by,
        )
        note = f"the requester {requester} approved their own change ({signed.approval_id})"
        deny.append((ReasonCodeV3.REQUESTER_APPROVED_OWN_CHANGE, [signed.record_id], [found], note))
    elif signed is not None and _member(requester, signed.co_approved_by, same):
        note = f"the requester {requester} countersigned their own change ({signed.approval_id})"
        deny.append((ReasonCodeV3.REQUESTER_APPROVED_OWN_CHANGE, [signed.record_id], [], note))
    if glass is None:
        for f in ci.evidence:
            if (
                isinstance(f, FreezeWindowRecord)
                and v3.FREEZE not in disabled
                and _member(proposal.environment, f.environments, same)
                and _within(f.starts_at, f.ends_at, as_of)
            ):
                found = Discrepancy(
                    record_id=f.record_id,
                    field="/ends_at",
                    proposed_value=ci.as_of,
                    evidence_value=f.ends_at,
                )
                note = f"a change freeze on {proposal.environment} runs until {f.ends_at}"
                deny.append((ReasonCodeV3.CHANGE_FREEZE_IN_EFFECT, [f.record_id], [found], note))
                break
        tiers = _policy_lists(ci, "two_person_tiers")
        if (
            gov is not None
            and v3.TWO_PERSON not in disabled
            and _member(proposal.risk_tier, tiers, same)
        ):
            second = [
                c
                for c in gov.co_approved_by
                if not same(c, gov.approved_by)
                and (v2.AUTHORITY in disabled or _member(c, authorised, same))
            ]
            if not second:
                note = (
                    f"risk tier {proposal.risk_tier} needs a second approver, and approval "
                    f"{gov.approval_id} records none authorised"
                )
                hold.append((ReasonCodeV3.SECOND_APPROVAL_MISSING, [gov.record_id], [], note))
        required = _policy_lists(ci, "window_environments")
        if (
            v3.WINDOW not in disabled
            and _member(proposal.environment, required, same)
            and not any(
                isinstance(w, MaintenanceWindowRecord)
                and same(w.environment, proposal.environment)
                and _within(w.starts_at, w.ends_at, as_of)
                for w in ci.evidence
            )
        ):
            note = f"no maintenance window for {proposal.environment} is open at {ci.as_of}"
            hold.append((ReasonCodeV3.OUTSIDE_MAINTENANCE_WINDOW, [], [], note))
    return deny, hold


def assess_v3(ci: CandidateInputV3, disabled: frozenset[str] = NONE) -> FindingV2:
    """Apply policy `rtb-narrow-approval-v3` to one candidate input.

    Args:
        ci: The candidate-visible input.
        disabled: Rule ids (`_decision_rules.py`, v0.2's and v0.3's) to leave out; v0.2's are
            passed on to `assess_v2`. Only an ablated reader of `rtb audit` passes any.
    """
    authorised = authorised_approvers(ci, disabled)
    base = assess_v2(_projection(ci, authorised), disabled)
    base = replace(
        base,
        reason_codes=tuple(ReasonCodeV3(code.value) for code in base.reason_codes),
        discrepancies=tuple(d for d in base.discrepancies if d.field != "/approved_by"),
    )
    deny, hold = _v3_conditions(ci, authorised, disabled)
    policy_refs = [p.record_id for p in ci.evidence if isinstance(p, PolicyRecordV3)]
    order = [(Decision.DENY, deny), (Decision.HOLD, hold)]
    if v2.PRECEDENCE in disabled:  # the ablated reader checks for missing information first
        order.reverse()
    for decision, added in order:
        if base.decision is not decision and not added:
            continue
        kept = base if base.decision is decision else None
        codes = [*(kept.reason_codes if kept else ()), *(c for c, _, _, _ in added)]
        refs = [*(kept.evidence_refs if kept else ()), *(r for _, ids, _, _ in added for r in ids)]
        found = [*(kept.discrepancies if kept else ()), *(d for _, _, ds, _ in added for d in ds)]
        notes = [kept.explanation] if kept else []
        notes += [f"{decision.value.capitalize()}: {note}." for _, _, _, note in added]
        return FindingV2(
            decision,
            tuple(dict.fromkeys(codes)),
            tuple(dict.fromkeys([*refs, *policy_refs])),
            tuple(found),
            " ".join(notes),
        )
    return base


def reference_finding(candidate_input: CandidateInputV3) -> dict[str, Any]:
    """`assess_v3` as reply fields (what the sentinels that reuse the policy's finding send)."""
    return finding_fields(assess_v3(candidate_input))


class ReferencePolicyV3Reviewer(ReferencePolicyV2Reviewer):
    """Deterministic reviewer answering with the v0.3 policy finding of `assess_v3`."""

    name = "reference-policy-v3"
    policy_ids: tuple[str, ...] = (POLICY_ID_V3,)
    """Policies this reviewer implements; a track refuses a corpus declaring another."""
    input_model: type[BaseModel] = CandidateInputV3
    """The v0.3 candidate-input format (a v0.2 input is refused)."""

    def assess(self, candidate_input: Any, disabled: frozenset[str] = NONE) -> FindingV2:
        """The policy's full reader, without the rules in `disabled` (`assess_v3`)."""
        return assess_v3(candidate_input, disabled)
