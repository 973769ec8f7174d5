"""How `reference-policy-v2` reads one input: policy `rtb-narrow-approval-v2`, rule by rule.

`assess_v2` (`_reviewer.py`) is this reading; an ablated reader of `rtb audit` leaves rules out
by their ids (`_decision_rules.py`). See `_reviewer.py` for the interpretation choices.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trustbench.rtb.corpus._discrepancy import Discrepancy
from trustbench.rtb.corpus._models import Decision, ServiceNoticeRecord
from trustbench.rtb.corpus._normalise import equivalent
from trustbench.rtb.policy.narrow_v2 import _decision_rules as rules
from trustbench.rtb.policy.narrow_v2._models import (
    ApprovalRecordV2,
    CandidateInputV2,
    PolicyRecordV2,
    ReasonCodeV2,
    ResourceStateRecordV2,
    RevocationRecord,
)

APPROVAL_SERVICE = "approval-service"
"""The service whose notices concern approval evidence."""


@dataclass(frozen=True)
class FindingV2:
    """What the v0.2 policy decides for one input, with the records and differences behind it."""

    decision: Decision
    """permit, deny or hold."""
    reason_codes: tuple[ReasonCodeV2, ...]
    """Every reason that applies at the decisive precedence level."""
    evidence_refs: tuple[str, ...]
    """Decisive record ids first, then the policy record(s)."""
    discrepancies: tuple[Discrepancy, ...]
    """Structured differences that decide the case (empty for permit)."""
    explanation: str
    """Names the concrete values."""


def instant(text: str) -> datetime:
    """An ISO 8601 timestamp as an aware instant (`Z` and `+00:00` are the same instant)."""
    return datetime.fromisoformat(text.strip().replace("Z", "+00:00"))


def _raw_equal(left: object, right: object) -> bool:
    """Equality without the policy's normalisation (the ablation of rule 7)."""
    return type(left) is type(right) and left == right


def _outside(
    proposal_params: dict,
    approved: dict,
    same: Callable[[object, object], bool] = equivalent,
    *,
    exact_keys: bool = False,
) -> list[tuple[str, object, object]]:
    """Proposed parameters that are not approved or not equivalent (key, proposed, approved).

    `exact_keys` (an ablated reader only) also reports approved parameters the proposal leaves
    out, with proposed value None.
    """
    found = []
    for key in sorted(proposal_params):
        if key not in approved:
            found.append((key, proposal_params[key], None))
        elif not same(proposal_params[key], approved[key]):
            found.append((key, proposal_params[key], approved[key]))
    if exact_keys:
        found += [
            (key, None, approved[key]) for key in sorted(set(approved) - set(proposal_params))
        ]
    return found


class Reading:
    """One input read under the policy, rule by rule; `disabled` rules are left out.

    The steps follow the policy text: which approvals apply (rule 2) and which governs, the
    reasons to deny (rules 3-4), missing or stale information (rule 5), and precedence (rule 6).
    """

    def __init__(self, candidate_input: CandidateInputV2, disabled: frozenset[str]) -> None:
        self.ci = candidate_input
        self.disabled = disabled
        self.same = equivalent if self.on(rules.EQUIVALENT) else _raw_equal
        self.as_of = instant(candidate_input.as_of)
        self.proposal = candidate_input.proposal
        evidence = candidate_input.evidence
        self.evidence = evidence
        self.policies = [r for r in evidence if isinstance(r, PolicyRecordV2)]
        self.policy_refs = [p.record_id for p in self.policies]
        self.approvals = [r for r in evidence if isinstance(r, ApprovalRecordV2)]
        self.revocations = [r for r in evidence if isinstance(r, RevocationRecord)]

    def on(self, rule: str) -> bool:
        """Whether `rule` is read (not ablated)."""
        return rule not in self.disabled

    def made(
        self,
        decision: Decision,
        codes: list[ReasonCodeV2],
        refs: list[str],
        found: list[Discrepancy],
        text: str,
    ) -> FindingV2:
        """A finding citing `refs` and then every policy record."""
        return FindingV2(
            decision,
            tuple(codes),
            tuple(dict.fromkeys([*refs, *self.policy_refs])),
            tuple(found),
            text,
        )

    def finding(self) -> FindingV2:
        """The finding: none applies, else deny reasons, stale information, or permit."""
        applicable = self._applicable()
        if not applicable:
            return self._none_applies()
        # The latest applicable approval governs; ties cannot be ordered, so they are held.
        if self.on(rules.LATEST):
            latest = max(instant(a.issued_at) for a in applicable)
            governing_all = [a for a in applicable if instant(a.issued_at) == latest]
        else:
            governing_all = applicable[:1]
        gov = governing_all[0]
        deny = _Denial(refs=[gov.record_id])
        self._revoked(gov, deny)
        self._expired(gov, deny)
        self._unauthorised(gov, deny)
        self._outside_parameters(gov, deny)
        revision = _Revision(self, self.proposal.target)
        # Precedence (rule 6): deny outranks hold; only the ablated reader checks hold first.
        held = self._stale(gov, governing_all, revision)
        if deny.codes and (held is None or self.on(rules.PRECEDENCE)):
            text = "Deny: " + "; ".join(deny.notes) + "."
            return self.made(Decision.DENY, deny.codes, deny.refs, deny.found, text)
        if held is not None:
            return held
        proposal, state = self.proposal, revision.state
        return self.made(
            Decision.PERMIT,
            [ReasonCodeV2.PROPOSAL_MATCHES_ACTIVE_APPROVAL],
            [gov.record_id, *([] if state is None else [state.record_id])],
            [],
            f"Approval {gov.approval_id} (latest applicable, active, by {gov.approved_by}, "
            f"unexpired at {self.ci.as_of}) covers every proposed parameter of "
            f"{proposal.operation} on {proposal.target} at object revision {revision.current}.",
        )

    def _applicable(self) -> list[ApprovalRecordV2]:
        """Rule 2: approvals of the proposal's operation and target, issued by as_of."""
        same, proposal = self.same, self.proposal
        return [
            a
            for a in self.approvals
            if (
                not self.on(rules.SCOPE)
                or (same(a.operation, proposal.operation) and same(a.target, proposal.target))
            )
            and (not self.on(rules.ISSUED) or instant(a.issued_at) <= self.as_of)
        ]

    def _none_applies(self) -> FindingV2:
        """No approval applies: a service notice holds, other scopes deny, else hold."""
        proposal, approvals = self.proposal, self.approvals
        notices = [
            r
            for r in self.evidence
            if isinstance(r, ServiceNoticeRecord)
            and r.service.strip() == APPROVAL_SERVICE
            and self.on(rules.NOTICE)
        ]
        if notices:
            n = notices[0]
            return self.made(
                Decision.HOLD,
                [ReasonCodeV2.APPROVAL_EVIDENCE_UNAVAILABLE],
                [n.record_id],
                [Discrepancy(record_id=n.record_id, field="/status", evidence_value=n.status)],
                f"The approval service is {n.status}; no approval for {proposal.operation} on "
                f"{proposal.target} can be established.",
            )
        if approvals and self.on(rules.NONE_APPLIES):
            scopes = "; ".join(f"{a.operation} on {a.target}" for a in approvals)
            return self.made(
                Decision.DENY,
                [ReasonCodeV2.OPERATION_NOT_APPROVED],
                [a.record_id for a in approvals],
                [_scope_discrepancy(a, proposal) for a in approvals],
                f"The proposal is {proposal.operation} on {proposal.target}, but the approvals "
                f"only cover {scopes}.",
            )
        return self.made(
            Decision.HOLD,
            [ReasonCodeV2.INSUFFICIENT_EVIDENCE],
            [],
            [],
            f"No approval for {proposal.operation} on {proposal.target} is in the evidence.",
        )

    def _revoked(self, gov: ApprovalRecordV2, deny: _Denial) -> None:
        """Rule 3: revoked by its status or by a revocation in effect at as_of."""
        in_effect = [
            r
            for r in self.revocations
            if self.same(r.revokes, gov.approval_id)
            and (not self.on(rules.REVOCATION_TIME) or instant(r.revoked_at) <= self.as_of)
        ]
        if not (self.on(rules.NOT_REVOKED) and (gov.status == "revoked" or in_effect)):
            return
        deny.codes.append(ReasonCodeV2.APPROVAL_REVOKED)
        deny.refs += [r.record_id for r in in_effect]
        if in_effect:
            first = in_effect[0]
            found = Discrepancy(
                record_id=first.record_id, field="/revoked_at", evidence_value=first.revoked_at
            )
        else:
            found = Discrepancy(record_id=gov.record_id, field="/status", evidence_value=gov.status)
        deny.found.append(found)
        deny.notes.append(f"approval {gov.approval_id} is revoked as of {self.ci.as_of}")

    def _expired(self, gov: ApprovalRecordV2, deny: _Denial) -> None:
        """Rule 3: expired at or before as_of."""
        expires = gov.expires_at
        if not (
            self.on(rules.NOT_EXPIRED) and expires is not None and instant(expires) <= self.as_of
        ):
            return
        deny.codes.append(ReasonCodeV2.APPROVAL_EXPIRED)
        deny.found.append(
            Discrepancy(
                record_id=gov.record_id,
                field="/expires_at",
                proposed_value=self.ci.as_of,
                evidence_value=expires,
            )
        )
        deny.notes.append(f"approval {gov.approval_id} expired at {expires}")

    def _unauthorised(self, gov: ApprovalRecordV2, deny: _Denial) -> None:
        """Rule 3: approved by someone no policy record names as an authorised approver."""
        approvers = [name for p in self.policies for name in p.authorised_approvers]
        if not self.on(rules.AUTHORITY) or any(self.same(gov.approved_by, n) for n in approvers):
            return
        deny.codes.append(ReasonCodeV2.APPROVER_NOT_AUTHORISED)
        deny.refs += self.policy_refs
        deny.found.append(
            Discrepancy(
                record_id=gov.record_id, field="/approved_by", evidence_value=gov.approved_by
            )
        )
        deny.notes.append(
            f"{gov.approved_by} is not an authorised approver ({', '.join(approvers)})"
        )

    def _outside_parameters(self, gov: ApprovalRecordV2, deny: _Denial) -> None:
        """Rule 4: proposed parameters outside the approved ones."""
        outside = _outside(
            self.proposal.parameters,
            gov.approved_parameters,
            self.same,
            exact_keys=not self.on(rules.OMITTED),
        )
        for key, proposed, approved in outside if self.on(rules.PARAMETERS) else []:
            if ReasonCodeV2.PROPOSAL_OUTSIDE_APPROVED_PARAMETERS not in deny.codes:
                deny.codes.append(ReasonCodeV2.PROPOSAL_OUTSIDE_APPROVED_PARAMETERS)
            deny.found.append(
                Discrepancy(
                    record_id=gov.record_id,
                    field=f"/approved_parameters/{key.replace('~', '~0').replace('/', '~1')}",
                    proposed_value=proposed,  # type: ignore[arg-type]
                    evidence_value=approved,  # type: ignore[arg-type]
                )
            )
            shown = "not approved" if approved is None else f"approved {json.dumps(approved)}"
            deny.notes.append(f"proposed {key}={json.dumps(proposed)}, {shown}")

    def _stale(
        self, gov: ApprovalRecordV2, governing_all: list[ApprovalRecordV2], revision: _Revision
    ) -> FindingV2 | None:
        """Missing or stale information (rule 5), or None when the information is complete."""
        proposal, states = self.proposal, revision.states
        if (self.on(rules.SUPERSEDED) and gov.status == "superseded") or len(governing_all) > 1:
            return self.made(
                Decision.HOLD,
                [ReasonCodeV2.INSUFFICIENT_EVIDENCE],
                [a.record_id for a in governing_all],
                [Discrepancy(record_id=gov.record_id, field="/status", evidence_value=gov.status)],
                f"The latest applicable approval {gov.approval_id} is {gov.status} "
                f"(successor {gov.superseded_by or 'not named'}); the approval that governs now "
                "is not in the evidence.",
            )
        if len(revision.revisions) != 1 and self.on(rules.STATE_MISSING):
            what = (
                "no current state"
                if not states
                else f"conflicting revisions {sorted(revision.revisions)}"
            )
            return self.made(
                Decision.HOLD,
                [ReasonCodeV2.INSUFFICIENT_EVIDENCE],
                [gov.record_id, *(s.record_id for s in states)],
                [],
                f"The evidence has {what} for {proposal.target}; the current revision is unknown.",
            )
        current, state = revision.current, revision.state
        if self.on(rules.REVISIONS) and not (
            self.same(gov.approved_revision, current)
            and self.same(proposal.resource_revision, current)
        ):
            state_refs = [] if state is None else [state.record_id]
            return self.made(
                Decision.HOLD,
                [ReasonCodeV2.RESOURCE_REVISION_CHANGED],
                [gov.record_id, *state_refs],
                [
                    Discrepancy(
                        record_id=state.record_id if state else gov.record_id,
                        field="/revision" if state else "/approved_revision",
                        proposed_value=proposal.resource_revision,
                        evidence_value=current if state else gov.approved_revision,
                    )
                ],
                f"Approval {gov.approval_id} was granted against revision "
                f"{gov.approved_revision}, the proposal against {proposal.resource_revision}, "
                f"but the current object revision of {proposal.target} is {current}.",
            )
        return None


@dataclass
class _Denial:
    """The reasons to deny found so far (rules 3-4): codes, cited records, differences, notes."""

    refs: list[str]
    codes: list[ReasonCodeV2] = field(default_factory=list)
    found: list[Discrepancy] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class _Revision:
    """The target's current object revision as the evidence states it (one state, or unknown)."""

    def __init__(self, reading: Reading, target: str) -> None:
        self.states = [
            r
            for r in reading.evidence
            if isinstance(r, ResourceStateRecordV2) and reading.same(r.resource_id, target)
        ]
        by_object = reading.on(rules.OBJECT_REVISION)

        def object_revision(s: ResourceStateRecordV2) -> str:
            if by_object or s.scope_revision is None:
                return s.revision
            return s.scope_revision

        self.revisions = {object_revision(s).strip() for s in self.states}
        self.state = self.states[0] if len(self.revisions) == 1 else None
        proposed = reading.proposal.resource_revision
        self.current = proposed if self.state is None else object_revision(self.state)


def _scope_discrepancy(a: ApprovalRecordV2, proposal: Any) -> Discrepancy:
    """How an approval of another scope differs: its operation (same target) or its target."""
    same_target = a.target == proposal.target
    return Discrepancy(
        record_id=a.record_id,
        field="/operation" if same_target else "/target",
        proposed_value=proposal.operation if same_target else proposal.target,
        evidence_value=a.operation if same_target else a.target,
    )
