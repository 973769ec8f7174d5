"""The approval service: approvals with scope, parameters, revision, status and expiry.

It can be made unavailable (every query fails) or slow (every query advances the simulated clock),
which is how the harness exercises a boundary's behaviour when approval evidence cannot be had.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from trustbench.rtb.platform._clock import SimulatedClock
from trustbench.rtb.platform._models import ApprovalSeed, RevocationSeed


class ApprovalServiceUnavailable(Exception):
    """The approval service could not be consulted; no approval can be established."""


class Approval(ApprovalSeed):
    """An approval as the service returns it (a copy; editing it changes nothing).

    The service holds the same record its seed declared, so it is the seed's model: a field
    added to approvals is declared once and reaches both.
    """


class ApprovalService:
    """In-memory approval service for one trial.

    It holds approval records, not one record per id: an approval can be issued again under the
    same id (a later record by another approver, at another time), and the service serves every
    record it was given, in order, as the evidence would show them. Revoking or re-dating an
    approval acts on every record of that id, as a revocation record names an approval id.

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
        self._approvals = [Approval(**a.model_dump()) for a in approvals]
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
        return [a for a in self._approvals if target is None or a.target == target]

    def revocations_for(self, target: str | None = None) -> list[RevocationSeed]:
        """Revocation records of the approvals scoped to `target` (every one when `None`).

        Same query as `approvals_for`, no extra latency.

        Raises:
            ApprovalServiceUnavailable: When the service is unavailable.
        """
        if not self.available:
            raise ApprovalServiceUnavailable("approval service unavailable")
        ids = {a.approval_id for a in self._approvals if target is None or a.target == target}
        return [r for r in self._revocations if r.approval_id in ids]

    def revoke(self, approval_id: str) -> None:
        """Revoke an approval now (fault injection and administrative path).

        Sets the status and records a revocation effective now, so both policy readings (the
        status, and revocation records judged at the evaluation time) see it.
        """
        self._update(approval_id, {"status": "revoked"})
        self._revocations.append(
            RevocationSeed(
                approval_id=approval_id, revoked_at=self._clock.now(), revoked_by="platform-admin"
            )
        )

    def set_expiry(self, approval_id: str, expires_at: datetime) -> None:
        """Change an approval's expiry (fault injection)."""
        self._update(approval_id, {"expires_at": expires_at})

    def _update(self, approval_id: str, changes: dict[str, object]) -> None:
        """Apply `changes` to every record of `approval_id`.

        Raises:
            KeyError: When the service holds no approval of that id.
        """
        if not any(a.approval_id == approval_id for a in self._approvals):
            raise KeyError(approval_id)
        self._approvals = [
            a.model_copy(update=changes) if a.approval_id == approval_id else a
            for a in self._approvals
        ]
