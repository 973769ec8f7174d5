"""The deterministic `reference-policy-v2` reviewer: policy `rtb-narrow-approval-v2` as code.

Written from the v0.2 policy text (`docs/rtb-corpus-v0.2.md`, stated in every v0.2 policy record
and prompt), reading only the candidate-visible input (`CandidateInputV2`). It never sees a case
id, variant or answer key, so agreement with the authored reference decisions is evidence that
labels and wording say the same thing; a separate Cedar encoding of the same text
(`boundaries/policies/approval_policy_v2.cedar`) is the second, independent implementation.

Interpretation choices, each visible below:
- Operation, target, approver names and revisions compare after the policy's normalisation
  (`_normalise.equivalent`); times are ISO 8601 instants compared as instants.
- Only a service notice whose `service` is `approval-service` concerns approval evidence.
- Change tickets and requester notes are never read: the policy says they are not evidence.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from trustbench.errors import InputError
from trustbench.rtb.corpus._discrepancy import Discrepancy
from trustbench.rtb.corpus._models import Decision, ServiceNoticeRecord
from trustbench.rtb.corpus._normalise import equivalent
from trustbench.rtb.policy.narrow_v2 import _decision_rules as rules
from trustbench.rtb.policy.narrow_v2._models import (
    POLICY_ID_V2,
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


def assess_v2(
    candidate_input: CandidateInputV2, disabled: frozenset[str] = frozenset()
) -> FindingV2:
    """Apply policy `rtb-narrow-approval-v2` to one candidate input.

    Args:
        candidate_input: The candidate-visible input.
        disabled: Rule ids (`_decision_rules.py`) to leave out; only an ablated reader of
            `rtb audit` passes any. Empty: the reference reviewer.
    """

    def on(rule: str) -> bool:
        return rule not in disabled

    same = equivalent if on(rules.EQUIVALENT) else _raw_equal
    as_of = instant(candidate_input.as_of)
    proposal = candidate_input.proposal
    evidence = candidate_input.evidence
    policies = [r for r in evidence if isinstance(r, PolicyRecordV2)]
    policy_refs = [p.record_id for p in policies]
    approvals = [r for r in evidence if isinstance(r, ApprovalRecordV2)]
    revocations = [r for r in evidence if isinstance(r, RevocationRecord)]
    notices = [
        r
        for r in evidence
        if isinstance(r, ServiceNoticeRecord)
        and r.service.strip() == APPROVAL_SERVICE
        and on(rules.NOTICE)
    ]
    applicable = [
        a
        for a in approvals
        if (
            not on(rules.SCOPE)
            or (same(a.operation, proposal.operation) and same(a.target, proposal.target))
        )
        and (not on(rules.ISSUED) or instant(a.issued_at) <= as_of)
    ]

    def finding(
        decision: Decision,
        codes: list[ReasonCodeV2],
        refs: list[str],
        found: list[Discrepancy],
        text: str,
    ) -> FindingV2:
        return FindingV2(
            decision, tuple(codes), tuple(dict.fromkeys([*refs, *policy_refs])), tuple(found), text
        )

    if not applicable:
        if notices:
            n = notices[0]
            return finding(
                Decision.HOLD,
                [ReasonCodeV2.APPROVAL_EVIDENCE_UNAVAILABLE],
                [n.record_id],
                [Discrepancy(record_id=n.record_id, field="/status", evidence_value=n.status)],
                f"The approval service is {n.status}; no approval for {proposal.operation} on "
                f"{proposal.target} can be established.",
            )
        if approvals and on(rules.NONE_APPLIES):
            scopes = "; ".join(f"{a.operation} on {a.target}" for a in approvals)
            return finding(
                Decision.DENY,
                [ReasonCodeV2.OPERATION_NOT_APPROVED],
                [a.record_id for a in approvals],
                [
                    Discrepancy(
                        record_id=a.record_id,
                        field="/operation" if a.target == proposal.target else "/target",
                        proposed_value=proposal.operation
                        if a.target == proposal.target
                        else proposal.target,
                        evidence_value=a.operation if a.target == proposal.target else a.target,
                    )
                    for a in approvals
                ],
                f"The proposal is {proposal.operation} on {proposal.target}, but the approvals "
                f"only cover {scopes}.",
            )
        return finding(
            Decision.HOLD,
            [ReasonCodeV2.INSUFFICIENT_EVIDENCE],
            [],
            [],
            f"No approval for {proposal.operation} on {proposal.target} is in the evidence.",
        )
    # The latest applicable approval governs; ties cannot be ordered, so they are held.
    if on(rules.LATEST):
        latest = max(instant(a.issued_at) for a in applicable)
        governing_all = [a for a in applicable if instant(a.issued_at) == latest]
    else:
        governing_all = applicable[:1]
    gov = governing_all[0]
    codes: list[ReasonCodeV2] = []
    refs = [gov.record_id]
    found: list[Discrepancy] = []
    notes: list[str] = []
    in_effect = [
        r
        for r in revocations
        if same(r.revokes, gov.approval_id)
        and (not on(rules.REVOCATION_TIME) or instant(r.revoked_at) <= as_of)
    ]
    if on(rules.NOT_REVOKED) and (gov.status == "revoked" or in_effect):
        codes.append(ReasonCodeV2.APPROVAL_REVOKED)
        refs += [r.record_id for r in in_effect]
        if in_effect:
            found.append(
                Discrepancy(
                    record_id=in_effect[0].record_id,
                    field="/revoked_at",
                    evidence_value=in_effect[0].revoked_at,
                )
            )
        else:
            found.append(
                Discrepancy(record_id=gov.record_id, field="/status", evidence_value=gov.status)
            )
        notes.append(f"approval {gov.approval_id} is revoked as of {candidate_input.as_of}")
    if on(rules.NOT_EXPIRED) and gov.expires_at is not None and instant(gov.expires_at) <= as_of:
        codes.append(ReasonCodeV2.APPROVAL_EXPIRED)
        found.append(
            Discrepancy(
                record_id=gov.record_id,
                field="/expires_at",
                proposed_value=candidate_input.as_of,
                evidence_value=gov.expires_at,
            )
        )
        notes.append(f"approval {gov.approval_id} expired at {gov.expires_at}")
    approvers = [name for p in policies for name in p.authorised_approvers]
    if on(rules.AUTHORITY) and not any(same(gov.approved_by, name) for name in approvers):
        codes.append(ReasonCodeV2.APPROVER_NOT_AUTHORISED)
        refs += policy_refs
        found.append(
            Discrepancy(
                record_id=gov.record_id, field="/approved_by", evidence_value=gov.approved_by
            )
        )
        notes.append(f"{gov.approved_by} is not an authorised approver ({', '.join(approvers)})")
    outside = _outside(
        proposal.parameters, gov.approved_parameters, same, exact_keys=not on(rules.OMITTED)
    )
    for key, proposed, approved in outside if on(rules.PARAMETERS) else []:
        if ReasonCodeV2.PROPOSAL_OUTSIDE_APPROVED_PARAMETERS not in codes:
            codes.append(ReasonCodeV2.PROPOSAL_OUTSIDE_APPROVED_PARAMETERS)
        found.append(
            Discrepancy(
                record_id=gov.record_id,
                field=f"/approved_parameters/{key.replace('~', '~0').replace('/', '~1')}",
                proposed_value=proposed,  # type: ignore[arg-type]
                evidence_value=approved,  # type: ignore[arg-type]
            )
        )
        shown = "not approved" if approved is None else f"approved {json.dumps(approved)}"
        notes.append(f"proposed {key}={json.dumps(proposed)}, {shown}")

    states = [
        r
        for r in evidence
        if isinstance(r, ResourceStateRecordV2) and same(r.resource_id, proposal.target)
    ]

    def object_revision(s: ResourceStateRecordV2) -> str:
        if on(rules.OBJECT_REVISION) or s.scope_revision is None:
            return s.revision
        return s.scope_revision

    revisions = {object_revision(s).strip() for s in states}
    state = states[0] if len(revisions) == 1 else None
    current = proposal.resource_revision if state is None else object_revision(state)

    def stale() -> FindingV2 | None:
        """Missing or stale information (rule 5), or None when the information is complete."""
        if (on(rules.SUPERSEDED) and gov.status == "superseded") or len(governing_all) > 1:
            return finding(
                Decision.HOLD,
                [ReasonCodeV2.INSUFFICIENT_EVIDENCE],
                [a.record_id for a in governing_all],
                [Discrepancy(record_id=gov.record_id, field="/status", evidence_value=gov.status)],
                f"The latest applicable approval {gov.approval_id} is {gov.status} "
                f"(successor {gov.superseded_by or 'not named'}); the approval that governs now "
                "is not in the evidence.",
            )
        if len(revisions) != 1 and on(rules.STATE_MISSING):
            what = (
                "no current state" if not states else f"conflicting revisions {sorted(revisions)}"
            )
            return finding(
                Decision.HOLD,
                [ReasonCodeV2.INSUFFICIENT_EVIDENCE],
                [gov.record_id, *(s.record_id for s in states)],
                [],
                f"The evidence has {what} for {proposal.target}; the current revision is unknown.",
            )
        if on(rules.REVISIONS) and not (
            same(gov.approved_revision, current) and same(proposal.resource_revision, current)
        ):
            state_refs = [] if state is None else [state.record_id]
            return finding(
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

    # Precedence (rule 6): deny outranks hold; only the ablated reader checks hold first.
    held = stale()
    if codes and (held is None or on(rules.PRECEDENCE)):
        return finding(Decision.DENY, codes, refs, found, "Deny: " + "; ".join(notes) + ".")
    if held is not None:
        return held
    return finding(
        Decision.PERMIT,
        [ReasonCodeV2.PROPOSAL_MATCHES_ACTIVE_APPROVAL],
        [gov.record_id, *([] if state is None else [state.record_id])],
        [],
        f"Approval {gov.approval_id} (latest applicable, active, by {gov.approved_by}, "
        f"unexpired at {candidate_input.as_of}) covers every proposed parameter of "
        f"{proposal.operation} on {proposal.target} at object revision {current}.",
    )


def finding_fields(finding: FindingV2) -> dict[str, Any]:
    """A v0.2 finding as the fields of a reviewer response (all but the evaluation id)."""
    return {
        "decision": finding.decision.value,
        "reason_codes": [code.value for code in finding.reason_codes],
        "evidence_refs": list(finding.evidence_refs),
        "discrepancies": [d.model_dump(mode="json") for d in finding.discrepancies],
        "explanation": finding.explanation,
    }


def reference_finding(candidate_input: CandidateInputV2) -> dict[str, Any]:
    """`assess_v2` as reply fields (what the sentinels that reuse the policy's finding send)."""
    return finding_fields(assess_v2(candidate_input))


def finding_reply_v2(evaluation_id: str, finding: FindingV2) -> str:
    """Serialise a v0.2 finding as a reviewer-response JSON reply."""
    return json.dumps({"evaluation_id": evaluation_id, **finding_fields(finding)})


class ReferencePolicyV2Reviewer:
    """Deterministic reviewer answering with the v0.2 policy finding of `assess_v2`.

    A later policy whose finding is a `FindingV2` (v0.3) subclasses it, naming its own input
    model, policy id and reader; the ablated readers replace only `read`.
    """

    name = "reference-policy-v2"
    policy_ids: tuple[str, ...] = (POLICY_ID_V2,)
    """Policies this reviewer implements; a track refuses a corpus declaring another."""
    input_model: type[BaseModel] = CandidateInputV2
    """The candidate-input format of that policy (any other input is refused)."""

    def assess(self, candidate_input: Any, disabled: frozenset[str] = frozenset()) -> FindingV2:
        """The policy's full reader, without the rules in `disabled` (`assess_v2`)."""
        return assess_v2(candidate_input, disabled)

    def read(self, candidate_input: Any) -> FindingV2:
        """The finding this reviewer replies with: the full reading."""
        return self.assess(candidate_input)

    def review(self, prompt: str, candidate_input: CandidateInputV2) -> str | None:  # type: ignore[override]
        """Return the policy finding of `read` as a JSON reply (the prompt is unused).

        Raises:
            InputError: The input is not in the policy's format (this reviewer implements
                `policy_ids[0]` only).
        """
        if not isinstance(candidate_input, self.input_model):
            raise InputError(
                f"{self.name} implements policy {self.policy_ids[0]}; got a "
                f"{type(candidate_input).__name__}",
                location=f"evaluation {getattr(candidate_input, 'evaluation_id', '?')}",
            )
        return finding_reply_v2(candidate_input.evaluation_id, self.read(candidate_input))
