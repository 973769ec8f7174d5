"""The approval service: approvals with scope, parameters, revision, status and expiry.

It can be made unavailable (every query fails) or slow (every query advances the simulated clock),
which is how the harness exercises a boundary's behaviour when approval evidence cannot be had.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from trustbench.rtb.corpus._models import ParamValue
from trustbench.rtb.platform._clock import SimulatedClock
from trustbench.rtb.platform._models import ApprovalSeed


class ApprovalServiceUnavailable(Exception):
    """The approval service could not be consulted; no approval can be established."""


class Approval(BaseModel):
    """An approval as the service returns it (a copy; editing it changes nothing)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    approval_id: str
    """The approval's identifier."""
    status: Literal["active", "revoked"]
    """`revoked` approvals authorize nothing."""
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


class ApprovalService:
    """In-memory approval service for one trial.

    Args:
        approvals: Approvals present at trial start.
        clock: The trial's clock (queries advance it by `latency_s`).
        available: Whether queries succeed.
        latency_s: Simulated seconds per query.
    """

    def __init__(
        self,
        approvals: list[ApprovalSeed],
        clock: SimulatedClock,
        *,
        available: bool = True,
        latency_s: float = 0.0,
    ) -> None:
        self._approvals = {a.approval_id: Approval(**a.model_dump()) for a in approvals}
        self._clock = clock
        self.available = available
        self.latency_s = latency_s

    def approvals_for(self, target: str) -> list[Approval]:
        """Every approval (any status) scoped to `target`.

        Raises:
            ApprovalServiceUnavailable: When the service is unavailable.
        """
        self._clock.advance(self.latency_s)
        if not self.available:
            raise ApprovalServiceUnavailable("approval service unavailable")
        return [a for a in self._approvals.values() if a.target == target]

    def revoke(self, approval_id: str) -> None:
        """Revoke an approval (fault injection and administrative path)."""
        approval = self._approvals[approval_id]
        self._approvals[approval_id] = approval.model_copy(update={"status": "revoked"})

    def set_expiry(self, approval_id: str, expires_at: datetime) -> None:
        """Change an approval's expiry (fault injection)."""
        approval = self._approvals[approval_id]
        self._approvals[approval_id] = approval.model_copy(update={"expires_at": expires_at})
