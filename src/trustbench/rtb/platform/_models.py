"""Contracts of the simulated target platform: its seed state, a request, an observer entry.

These are the data that cross a boundary between components: the harness seeds a platform from a
`PlatformSeed`, presents a `ControlRequest` to the boundary under test, and the protected observer
records `EffectEntry` items that only the grader reads. Every field is documented because the
effect log is part of the published per-trial record.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from trustbench.rtb.corpus._models import ParamValue
from trustbench.rtb.platform._governance import GovernanceSeed
from trustbench.rtb.policy._default import DEFAULT_POLICY_ID


class _Frozen(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)


class ResourceSeed(_Frozen):
    """A resource as it exists on the platform when a trial starts."""

    resource_id: str
    """Platform identifier; a request's `target` names it."""
    resource_type: str
    """E.g. `backup_plan`, `dns_zone`."""
    revision: str
    """Authoritative current revision, owned by the platform (an actor cannot set it)."""
    attributes: dict[str, ParamValue]
    """Attribute values the executor changes when it applies an operation."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Free-form metadata the actor may edit (it never changes the authoritative revision)."""
    state_readable: bool = True
    """`False`: the resource API cannot serve this resource's state, so a boundary sees none (an
    evidence gap); the executor and the protected observer still reach it."""


class ApprovalSeed(_Frozen):
    """An approval held by the platform's approval service when a trial starts."""

    approval_id: str
    """The approval's identifier in the approval service (an approval re-issued later under the
    same id is a further record with it; the service holds both)."""
    status: Literal["active", "revoked", "superseded"]
    """`revoked` and `superseded` approvals authorize nothing."""
    operation: str
    """The operation this approval authorizes."""
    target: str
    """The resource this approval is scoped to."""
    approved_parameters: dict[str, ParamValue]
    """The exact parameters authorized."""
    approved_revision: str
    """The resource revision the approval was granted against."""
    expires_at: datetime | None = None
    """Timezone-aware expiry; `None` means no expiry."""
    approved_by: str | None = None
    """Who granted it (policy v2 checks it against the authorised approvers; `None`: unknown)."""
    issued_at: datetime | None = None
    """Timezone-aware issue time (policy v2: the latest applicable approval governs)."""
    superseded_by: str | None = None
    """The successor's `approval_id`, when status is `superseded`."""
    co_approved_by: list[str] = Field(default_factory=list, exclude_if=lambda names: not names)
    """Further approvers who countersigned it (two-person approval; left out of a dump when
    empty, so an approval of a policy without countersignatures reads as it always did)."""


class RevocationSeed(_Frozen):
    """A revocation record held by the approval service (policy v2 reads these)."""

    approval_id: str
    """The approval it revokes."""
    revoked_at: datetime
    """Timezone-aware instant from which it takes effect (none before it)."""
    revoked_by: str
    """Who revoked it."""


class PlatformSeed(_Frozen):
    """Everything needed to build a fresh, independent platform state for one trial."""

    start_time: datetime
    """Timezone-aware simulated wall time at which the trial starts."""
    resources: list[ResourceSeed]
    """Resources on the platform."""
    approvals: list[ApprovalSeed]
    """Approvals in the approval service."""
    revocations: list[RevocationSeed] = Field(default_factory=list)
    """Revocation records in the approval service."""
    policy_id: str = DEFAULT_POLICY_ID
    """The approval policy in force on this platform (the boundaries enforce it by id; an id they
    do not implement fails closed)."""
    authorised_approvers: list[str] = Field(default_factory=list)
    """Who may grant approvals under the policy in force (policy v2; empty: nobody)."""
    approval_service_available: bool = True
    """`False`: every approval query fails with `ApprovalServiceUnavailable`."""
    approval_service_latency_s: float = Field(default=0.0, ge=0.0)
    """Simulated seconds each approval query takes (the clock advances by this much)."""
    governance: GovernanceSeed = Field(
        default_factory=GovernanceSeed, exclude_if=lambda governance: governance.is_empty()
    )
    """Requester, policy configuration, change calendar, delegations and break-glass records
    (`_governance.py`; empty, and left out of a dump, for a policy that gates on none)."""


class ControlRequest(_Frozen):
    """A change presented directly to the boundary under test. Candidate-visible: no answer key."""

    request_id: str
    """Unpredictable id issued by the harness; also the client's idempotency key."""
    operation: str
    """Operation name, as in the case proposal."""
    target: str
    """Resource the operation acts on."""
    parameters: dict[str, ParamValue]
    """Operation parameters exactly as proposed."""
    resource_revision: str
    """Revision the request was prepared against."""


class ObservedResource(_Frozen):
    """The observer's reading of one resource."""

    revision: str
    """Authoritative revision at the time of reading."""
    attributes: dict[str, ParamValue]
    """Attribute values at the time of reading."""
    labels: dict[str, str]
    """Labels at the time of reading."""


class EffectKind(StrEnum):
    """What an observer entry records."""

    INITIAL_STATE = "initial_state"
    """The observer's reading of every resource when the trial starts (required evidence)."""
    MUTATION = "mutation"
    """The executor committed a change to a resource."""
    IN_DOUBT = "in_doubt"
    """A dispatch reached the target but the observer could not yet establish its result."""
    LABEL_EDIT = "label_edit"
    """The actor edited a resource's labels (metadata only)."""
    FINAL_STATE = "final_state"
    """The observer's reading at the observation deadline (required evidence)."""
    STATE_MISMATCH = "state_mismatch"
    """Actual target state differs from what the recorded effects imply (an unrecorded change)."""


class EffectEntry(_Frozen):
    """One append-only, hash-chained entry of the protected observer's effect log."""

    seq: int
    """Position in the log, from 0."""
    trial_id: str
    """The trial this entry belongs to."""
    kind: EffectKind
    """What the entry records."""
    observed_at_s: float
    """Simulated seconds since trial start at which the observer established this entry."""
    source: Literal["executor", "actor", "observer"]
    """Which platform path produced the entry (never the boundary or the candidate)."""
    commit_id: str | None = None
    """Executor commit id, for `mutation` and `in_doubt` entries."""
    committed_at_s: float | None = None
    """Simulated seconds since trial start at which the commit happened, when known."""
    target: str | None = None
    """Resource the entry concerns."""
    operation: str | None = None
    """Operation applied, for `mutation` entries."""
    parameters: dict[str, ParamValue] | None = None
    """Parameters applied, for `mutation` entries."""
    before: ObservedResource | None = None
    """Resource state before the change."""
    after: ObservedResource | None = None
    """Resource state after the change."""
    snapshot: dict[str, ObservedResource | None] | None = None
    """For state entries: every resource's reading; `None` marks a resource the observer could
    not read at that time (its outcome cannot be established from this entry)."""
    detail: str = ""
    """Human-readable note."""
    prev_hash: str
    """`entry_hash` of the previous entry (64 zeros for the first)."""
    entry_hash: str
    """SHA-256 over the RFC 8785 canonical JSON of every other field plus `prev_hash`."""


def entry_payload(entry: EffectEntry | dict[str, Any]) -> dict[str, Any]:
    """Return the fields an entry hash covers (all but `entry_hash`), as plain JSON data.

    Args:
        entry: An entry or its JSON-mode dict.

    Returns:
        The dict the hash is computed over.
    """
    data = entry.model_dump(mode="json") if isinstance(entry, EffectEntry) else dict(entry)
    data.pop("entry_hash", None)
    return data
