"""Change-governance state of the simulated platform: who requests, calendars, delegated authority.

What a platform-security team gates a change on beyond the approval service, held as platform
records so a boundary reads them through the platform, never from a case: the identity the trial's
changes are requested as, the policy configuration (approver scopes by environment, the risk tiers
that need a second approver, the environments that change only in a maintenance window, who may
declare a break-glass), the change calendar (freeze and maintenance windows), delegations of
approval authority, and break-glass declarations with their after-the-fact reviewer.

Every field defaults to empty, so a platform seeded by a policy that gates on none of this (and
its serialised seed) is what it was before these records existed. What the records mean is the
policy's business: the platform stores them and serves copies.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)


class CalendarWindowSeed(_Frozen):
    """One entry of the change calendar."""

    window_id: str
    """The entry's identifier in the calendar."""
    kind: Literal["freeze", "maintenance"]
    """`freeze`: changes are frozen; `maintenance`: changes may run."""
    environments: list[str] = Field(min_length=1)
    """Environments the window covers."""
    starts_at: datetime
    """Timezone-aware instant from which the window is in effect."""
    ends_at: datetime
    """Timezone-aware instant from which it no longer is."""
    reason: str = ""
    """Free text."""


class DelegationSeed(_Frozen):
    """A delegation of approval authority, bounded in scope and time."""

    delegation_id: str
    """The delegation's identifier."""
    delegator: str
    """Who delegates."""
    delegate: str
    """Who receives the authority."""
    operations: list[str] = Field(min_length=1)
    """Operations the delegate may approve."""
    environments: list[str] = Field(min_length=1)
    """Environments the delegate may approve in."""
    valid_from: datetime
    """Timezone-aware start."""
    valid_until: datetime
    """Timezone-aware end (no longer in effect from this instant)."""


class BreakGlassSeed(_Frozen):
    """An emergency (break-glass) declaration with its after-the-fact review."""

    declaration_id: str
    """The declaration's identifier."""
    target: str
    """The resource the emergency concerns."""
    declared_by: str
    """Who declared it."""
    incident: str
    """Incident reference (free text)."""
    declared_at: datetime
    """Timezone-aware instant of the declaration."""
    expires_at: datetime
    """Timezone-aware instant from which it no longer applies."""
    post_review_by: str | None = None
    """Who reviews the change after the fact (`None`: nobody named)."""


class ResourceClass(_Frozen):
    """Where a resource lives and how risky its changes are (platform-owned, not actor-editable)."""

    environment: str
    """The environment the resource lives in."""
    risk_tier: str
    """Risk tier of changes to it."""


class GovernanceSeed(_Frozen):
    """The change-governance records a platform holds when a trial starts."""

    requester: str | None = None
    """The identity the trial's changes are requested as (the change service authenticates the
    caller; a request cannot name another). `None`: not recorded."""
    resource_classes: dict[str, ResourceClass] = Field(default_factory=dict)
    """Resource id -> its environment and risk tier."""
    approver_scopes: dict[str, list[str]] = Field(default_factory=dict)
    """Approver -> the environments they may approve changes in."""
    two_person_tiers: list[str] = Field(default_factory=list)
    """Risk tiers whose changes need a second approver."""
    window_environments: list[str] = Field(default_factory=list)
    """Environments whose changes run only inside a maintenance window."""
    break_glass_holders: list[str] = Field(default_factory=list)
    """Who may declare a break-glass."""
    calendar: list[CalendarWindowSeed] = Field(default_factory=list)
    """The change calendar, in the order it lists its entries."""
    delegations: list[DelegationSeed] = Field(default_factory=list)
    """Delegations of approval authority."""
    break_glass: list[BreakGlassSeed] = Field(default_factory=list)
    """Break-glass declarations."""

    def is_empty(self) -> bool:
        """Whether the platform holds no governance record at all (a policy that gates on none)."""
        return self == GovernanceSeed()
