"""The approval service: approvals with scope, parameters, revision, status and expiry.

It can be made unavailable (every query fails) or slow (every query advances the simulated clock),
which is how the harness exercises a boundary's behaviour when approval evidence cannot be had.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from trustbench.rtb.corpus._models import ParamValue
from trustbench.rtb.platform._clock import SimulatedClock
from trustbench.rtb.platform._models import ApprovalSeed, RevocationSeed


class ApprovalServiceUnavailable(Exception):
    """The approval service could not be consulted; no approval can be established."""


class Approval(BaseModel):
    """An approval as the service returns it (a copy; editing it changes nothing)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    approval_id: str
    """The approval's identifier."""
    status: Literal["active", "revoked", "superseded"]
    """`revoked` and `superseded` approvals authorize nothing."""
    operation: str
    """The operation authorized."""
    target: str
    """The resource the approval is scoped to."""
    approved_parameters: dict[str, ParamValue]
    """The exact parameters authorized."""
    approved_revision: str
    """The resource revision the approval was granted against."""
    expires_at: datetime | None
    """Expiry, or `None` for none."""
    approved_by: str | None = None
    """Who granted it, or `None` when unknown."""
    issued_at: datetime | None = None
    """Issue time, or `None` when unknown."""
    superseded_by: str | None = None
    """The successor's `approval_id`, when superseded."""


class ApprovalService:
    """In-memory approval service for one trial.

    Args:
        approvals: Approvals present at trial start.
        revocations: Revocation records present at trial start.
        clock: The trial's clock (queries advance it by `latency_s`).
        available: Whether queries succeed.
        latency_s: Simulated seconds per query.
    """

    def __init__(
        self,
        approvals: list[ApprovalSeed],
        clock: SimulatedClock,
        revocations: Sequence[RevocationSeed] = (),
        *,
        available: bool = True,
        latency_s: float = 0.0,
    ) -> None:
        self._approvals = {a.approval_id: Approval(**a.model_dump()) for a in approvals}
        self._revocations = list(revocations)
        self._clock = clock
        self.available = available
        self.latency_s = latency_s

    def approvals_for(self, target: str | None = None) -> list[Approval]:
        """Every approval (any status) scoped to `target`, or every approval when it is `None`.

        The listing of every approval is what a policy needs that denies a request when
        approvals exist but none is for its target (the narrow policy's rule 4): a query by one
        target cannot tell "no approval anywhere" from "approvals for other resources only".

        Raises:
            ApprovalServiceUnavailable: When the service is unavailable.
        """
        self._clock.advance(self.latency_s)
        if not self.available:
            raise ApprovalServiceUnavailable("approval service unavailable")
        return [a for a in self._approvals.values() if target is None or a.target == target]

    def revocations_for(self, target: str | None = None) -> list[RevocationSeed]:
        """Revocation records of the approvals scoped to `target` (every one when `None`).

        Same query as `approvals_for`, no extra latency.

        Raises:
            ApprovalServiceUnavailable: When the service is unavailable.
        """
        if not self.available:
            raise ApprovalServiceUnavailable("approval service unavailable")
        ids = {
            a.approval_id for a in self._approvals.values() if target is None or a.target == target
        }
        return [r for r in self._revocations if r.approval_id in ids]

    def revoke(self, approval_id: str) -> None:
        """Revoke an approval now (fault injection and administrative path).

        Sets the status and records a revocation effective now, so both policy readings (the
        status, and revocation records judged at the evaluation time) see it.
        """
        approval = self._approvals[approval_id]
        self._approvals[approval_id] = approval.model_copy(update={"status": "revoked"})
        self._revocations.append(
            RevocationSeed(
                approval_id=approval_id, revoked_at=self._clock.now(), revoked_by="platform-admin"
            )
        )

    def set_expiry(self, approval_id: str, expires_at: datetime) -> None:
        """Change an approval's expiry (fault injection)."""
        approval = self._approvals[approval_id]
        self._approvals[approval_id] = approval.model_copy(update={"expires_at": expires_at})
