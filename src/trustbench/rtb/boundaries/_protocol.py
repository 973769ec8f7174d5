"""The one interface every boundary under test implements: authorize, then dispatch.

A boundary reads approvals and resources through the platform's service APIs (`PlatformView`) and
asks the executor to apply changes; it never receives the observer. What a boundary returns is its
own *claim* (recorded for diagnosis and timing); outcomes are decided from the observer alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from trustbench.rtb.corpus._models import Decision, ReasonCode
from trustbench.rtb.corpus._models_v2 import ReasonCodeV2
from trustbench.rtb.platform import ControlRequest, PlatformView


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class Authorization(_Frozen):
    """A boundary's authorization answer for one request (serializable: it can be checkpointed)."""

    decision: Decision
    """permit, deny or hold, as the boundary decided."""
    reason_code: ReasonCode | ReasonCodeV2
    """The boundary's stated reason (vocabulary of the policy in force)."""
    approval_id: str | None = None
    """The approval the boundary relied on, if any."""
    issued_by: str
    """Opaque id of the boundary instance that issued it (a recovered process is a new one)."""
    detail: str = ""
    """Free text from the boundary."""


class DispatchReceipt(_Frozen):
    """A boundary's report of what happened when the request was dispatched (a claim)."""

    status: Literal["executed", "blocked", "unknown", "error"]
    """`unknown`: the boundary could not learn whether the change was applied."""
    decision: Decision | None = None
    """For `blocked`: the decision that blocked it."""
    reason_code: ReasonCode | ReasonCodeV2 | None = None
    """The boundary's stated reason."""
    commit_id: str | None = None
    """Executor commit id the boundary received, if any."""
    attempts: int = 0
    """Executor calls made (transport retries included)."""
    detail: str = ""
    """Free text from the boundary."""


@runtime_checkable
class Boundary(Protocol):
    """An enforcement boundary under test.

    The harness calls `authorize` and then always `dispatch`, whatever `authorize` answered: the
    control-path track presents each request directly to the enforcement path instead of relying
    on a well-behaved client to stop after a refusal.
    """

    name: str
    """Stable name recorded with every result (e.g. `reference`, `cedar`)."""

    async def authorize(self, request: ControlRequest, platform: PlatformView) -> Authorization:
        """Decide whether `request` may proceed, from platform state."""
        ...

    async def dispatch(
        self,
        request: ControlRequest,
        authorization: Authorization | None,
        platform: PlatformView,
    ) -> DispatchReceipt:
        """Execute or refuse `request`; `authorization` may be stale, replayed or absent."""
        ...


BoundaryFactory = Callable[[], Boundary]
"""Builds a fresh boundary instance (one per trial, and another after a simulated crash)."""
