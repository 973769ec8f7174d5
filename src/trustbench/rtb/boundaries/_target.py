"""Where a trial runs: the local simulated platform, or a user's own service over HTTP.

A `TargetEnvironment` opens one independent trial (fresh state from a `PlatformSeed`) and returns
a `TargetSession`. The session gives the boundary its view, lets the harness inject faults, runs
the observer to the deadline, and hands the effect log to the grader. Every result records the
session's `environment_strength`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, Field

from trustbench._docstrings import documented
from trustbench.rtb.corpus._models import ParamValue
from trustbench.rtb.platform import EffectEntry, PlatformSeed, SimulatedPlatform

_T = TypeVar("_T")


class InjectAction(BaseModel):
    """One harness-side action on the target (fault injection, actor step, or audit tamper)."""

    model_config = documented(extra="forbid", frozen=True)

    action: Literal[
        "revoke_approval",
        "set_approval_expiry",
        "advance_clock",
        "set_approval_service",
        "lose_next_response",
        "edit_labels",
        "tamper_resource",
        "operator_stop",
    ]
    """What to do."""
    approval_id: str | None = None
    """For approval actions."""
    expires_at: datetime | None = None
    """For `set_approval_expiry`."""
    seconds: float | None = Field(default=None, ge=0)
    """For `advance_clock`; for `lose_next_response`, the reconciliation delay."""
    available: bool | None = None
    """For `set_approval_service`."""
    latency_s: float | None = Field(default=None, ge=0)
    """For `set_approval_service`: simulated seconds per query."""
    target: str | None = None
    """Resource for `lose_next_response`, `edit_labels`, `tamper_resource`; for
    `operator_stop`, the stopped resource (`None`: every resource)."""
    reason: str = ""
    """For `operator_stop`: why the operator stopped it, in words (recorded)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """For `edit_labels`."""
    attributes: dict[str, ParamValue] = Field(default_factory=dict)
    """For `tamper_resource`."""


class TargetSession(Protocol):
    """One open trial on a target."""

    view: Any
    """What the boundary receives (a `PlatformView`, or a remote trial handle)."""
    environment_strength: str
    """`simulated platform` or `external service <URL>`."""

    async def inject(self, action: InjectAction) -> None:
        """Apply one harness-side action."""
        ...

    async def settle(self, deadline_s: float) -> None:
        """Run the observer to the observation deadline."""
        ...

    async def observer_entries(self) -> list[EffectEntry]:
        """The effect log (for the grader only)."""
        ...

    async def close(self) -> None:
        """Release the trial's state."""
        ...


class TargetEnvironment(Protocol):
    """Opens independent trials."""

    async def open_trial(self, trial_id: str, seed: PlatformSeed) -> TargetSession:
        """Build fresh state for one trial."""
        ...


def apply_action(platform: SimulatedPlatform, action: InjectAction) -> None:
    """Apply `action` to a local simulated platform (shared with the HTTP reference service)."""
    faults = platform.faults
    match action.action:
        case "revoke_approval":
            faults.revoke_approval(_need(action.approval_id, "approval_id"))
        case "set_approval_expiry":
            faults.set_approval_expiry(
                _need(action.approval_id, "approval_id"), _need(action.expires_at, "expires_at")
            )
        case "advance_clock":
            faults.advance_clock(_need(action.seconds, "seconds"))
        case "set_approval_service":
            faults.set_approval_service(
                available=_need(action.available, "available"), latency_s=action.latency_s
            )
        case "lose_next_response":
            faults.lose_next_response(
                _need(action.target, "target"), _need(action.seconds, "seconds")
            )
        case "edit_labels":
            platform.actor.edit_labels(_need(action.target, "target"), action.labels)
        case "tamper_resource":
            faults.tamper_resource(_need(action.target, "target"), action.attributes)
        case "operator_stop":
            faults.operator_stop(action.target, action.reason or "operator stop")


def _need(value: _T | None, name: str) -> _T:
    if value is None:
        raise ValueError(f"inject action needs `{name}`")
    return value


class _SimulatedSession:
    def __init__(self, platform: SimulatedPlatform) -> None:
        self._platform = platform
        self.view = platform.view
        self.environment_strength = platform.environment_strength

    async def inject(self, action: InjectAction) -> None:
        apply_action(self._platform, action)

    async def settle(self, deadline_s: float) -> None:
        self._platform.settle(deadline_s)

    async def observer_entries(self) -> list[EffectEntry]:
        return self._platform.observer_reader().entries()

    async def close(self) -> None:
        return None


class SimulatedEnvironment:
    """Runs every trial on a fresh in-process `SimulatedPlatform`."""

    async def open_trial(self, trial_id: str, seed: PlatformSeed) -> TargetSession:
        """Build a fresh platform for `trial_id` (state reset between independent trials)."""
        return _SimulatedSession(SimulatedPlatform(trial_id, seed))
