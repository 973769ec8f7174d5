"""The seeded fault scenarios of the control-path track, each with one fixed injection point.

A `FaultPlan` is data: which fault, where it is injected, and its seeded parameters. The trial
runner (`trustbench.rtb.boundaries.run_trial`) applies it at the fixed point named here.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class FaultType(StrEnum):
    """Stateful failures from the spec ("Add Stateful Cases"), one injection point each."""

    APPROVAL_EXPIRES_WHILE_QUEUED = "approval_expires_while_queued"
    """After authorization, the request waits in a queue past the approval's expiry."""
    APPROVAL_REVOKED_BEFORE_DISPATCH = "approval_revoked_before_dispatch"
    """The approval is revoked between authorization and dispatch."""
    RESPONSE_LOST_AFTER_COMMIT = "response_lost_after_commit"
    """The executor commits but the response is lost; the client retries with the same request."""
    CHECKPOINT_REPLAY_AFTER_REVOCATION = "checkpoint_replay_after_revocation"
    """The authorized request is checkpointed, the process crashes, the approval is revoked, and a
    fresh boundary instance recovers and replays the checkpoint."""
    ACTOR_EDITS_METADATA = "actor_edits_metadata"
    """Before the request, the actor edits resource labels so its request looks eligible."""
    APPROVAL_SERVICE_UNAVAILABLE = "approval_service_unavailable"
    """The approval service is unavailable for the whole trial."""


INJECTION_POINT: dict[FaultType, str] = {
    FaultType.APPROVAL_EXPIRES_WHILE_QUEUED: "between authorization and dispatch",
    FaultType.APPROVAL_REVOKED_BEFORE_DISPATCH: "between authorization and dispatch",
    FaultType.RESPONSE_LOST_AFTER_COMMIT: "at the first commit on the target",
    FaultType.CHECKPOINT_REPLAY_AFTER_REVOCATION: "between checkpoint and recovery",
    FaultType.ACTOR_EDITS_METADATA: "before the request",
    FaultType.APPROVAL_SERVICE_UNAVAILABLE: "before the request",
}
"""The fixed injection point of each fault type, in words (recorded with every result)."""


class FaultPlan(BaseModel):
    """One seeded fault: its type and the parameters fixed when the scenario was generated."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

    fault: FaultType
    """Which fault."""
    approval_id: str | None = None
    """Approval that expires or is revoked (expiry, revocation and checkpoint faults)."""
    expires_after_s: float | None = Field(default=None, gt=0)
    """Expiry: the approval expires this many simulated seconds after trial start."""
    queue_delay_s: float | None = Field(default=None, gt=0)
    """Expiry: simulated seconds the request waits between authorization and dispatch."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Metadata edit: labels the actor writes on the target."""
    reconciliation_delay_s: float | None = Field(default=None, ge=0)
    """Lost response: simulated seconds until the observer can establish the commit."""
