"""One trial's simulated target, split into the capabilities each party may hold.

`SimulatedPlatform.build(trial_id, seed)` makes fresh, independent state for every trial (state
reset = building a new platform). It then hands out:

- `PlatformView` to the boundary under test: approvals and resources through their service APIs,
  the clock, and the executor. No observer handle.
- `ActorConsole` to the scenario's actor: what an agent may legitimately touch (resource labels).
- `FaultInjector` to the harness: revoke, expire, make the approval service unavailable or slow,
  lose a response, tamper with state out of band (harness qualification only).
- `ObserverReader` to the grader, and to nobody else.
"""

from __future__ import annotations

from datetime import datetime

from trustbench.rtb.platform._approvals import Approval, ApprovalService
from trustbench.rtb.platform._clock import SimulatedClock
from trustbench.rtb.platform._executor import ExecutionReceipt, Executor, ResourceStore
from trustbench.rtb.platform._governance import GovernanceSeed
from trustbench.rtb.platform._models import (
    ControlRequest,
    ObservedResource,
    ParamValue,
    PlatformSeed,
    RevocationSeed,
)
from trustbench.rtb.platform._observer import EffectSink, ObserverReader, ProtectedObserver
from trustbench.rtb.policy._default import DEFAULT_POLICY_ID

ENVIRONMENT_STRENGTH_SIMULATED = "simulated platform"
"""Recorded with every result from this platform: a simulated denial does not establish that a
real infrastructure API rejects the request."""


class PlatformView:
    """The boundary's view: service APIs only. Holds no observer handle."""

    __slots__ = (
        "_approvals",
        "_clock",
        "_executor",
        "_store",
        "authorised_approvers",
        "governance",
        "policy_id",
        "trial_id",
    )

    def __init__(
        self,
        trial_id: str,
        approvals: ApprovalService,
        store: ResourceStore,
        clock: SimulatedClock,
        executor: Executor,
        *,
        policy_id: str = DEFAULT_POLICY_ID,
        authorised_approvers: tuple[str, ...] = (),
        governance: GovernanceSeed | None = None,
    ) -> None:
        self.trial_id = trial_id
        self.policy_id = policy_id
        """The approval policy in force on the platform (platform configuration)."""
        self.authorised_approvers = authorised_approvers
        """Who may grant approvals under that policy."""
        self.governance = governance or GovernanceSeed()
        """Requester, policy configuration, change calendar, delegations and break-glass
        declarations (platform records; a frozen copy, so reading it changes nothing)."""
        self._approvals = approvals
        self._store = store
        self._clock = clock
        self._executor = executor

    def now(self) -> datetime:
        """Current simulated time."""
        return self._clock.now()

    def approvals_for(self, target: str | None = None) -> list[Approval]:
        """Query the approval service for `target`, or list every approval when `None`.

        May raise `ApprovalServiceUnavailable`; may be slow.
        """
        return self._approvals.approvals_for(target)

    def revocations_for(self, target: str | None = None) -> list[RevocationSeed]:
        """Revocation records of approvals scoped to `target`, or every one when `None`.

        May raise like `approvals_for`.
        """
        return self._approvals.revocations_for(target)

    def resource(self, resource_id: str) -> ObservedResource | None:
        """Read a resource's current revision, attributes and labels (a copy)."""
        live = self._store.get(resource_id)
        if live is None or not self._store.readable(resource_id):
            return None
        return live.observed()

    def execute(self, request: ControlRequest, *, idempotency_key: str) -> ExecutionReceipt:
        """Ask the executor to apply `request` (may raise `ResponseLost`)."""
        return self._executor.execute(request, idempotency_key=idempotency_key)


class ActorConsole:
    """What the scenario's actor may do directly: edit resource labels (metadata)."""

    __slots__ = ("_sink", "_store")

    def __init__(self, store: ResourceStore, sink: EffectSink) -> None:
        self._store = store
        self._sink = sink

    def edit_labels(self, resource_id: str, labels: dict[str, str]) -> None:
        """Set labels on a resource. The authoritative revision does not change."""
        live = self._store.get(resource_id)
        if live is None:
            raise KeyError(resource_id)
        before = live.observed()
        live.labels.update(labels)
        self._sink.label_edit(target=resource_id, before=before, after=live.observed())


class FaultInjector:
    """Harness-only fault injection on one trial's platform."""

    __slots__ = ("_approvals", "_clock", "_executor", "_store")

    def __init__(
        self,
        approvals: ApprovalService,
        clock: SimulatedClock,
        executor: Executor,
        store: ResourceStore,
    ) -> None:
        self._approvals = approvals
        self._clock = clock
        self._executor = executor
        self._store = store

    def revoke_approval(self, approval_id: str) -> None:
        """Revoke an approval now."""
        self._approvals.revoke(approval_id)

    def set_approval_expiry(self, approval_id: str, expires_at: datetime) -> None:
        """Change an approval's expiry."""
        self._approvals.set_expiry(approval_id, expires_at)

    def advance_clock(self, seconds: float) -> None:
        """Let simulated time pass (e.g. a request waiting in a queue)."""
        self._clock.advance(seconds)

    def set_approval_service(self, *, available: bool, latency_s: float | None = None) -> None:
        """Make the approval service available or unavailable, and optionally slow."""
        self._approvals.available = available
        if latency_s is not None:
            self._approvals.latency_s = latency_s

    def lose_next_response(self, target: str, reconciliation_delay_s: float) -> None:
        """The next commit on `target` happens but its response is lost."""
        self._executor.lose_next_response(target, reconciliation_delay_s)

    def tamper_resource(self, resource_id: str, attributes: dict[str, ParamValue]) -> None:
        """Change a resource out of band, bypassing executor and observer (harness audit only)."""
        live = self._store.get(resource_id)
        if live is None:
            raise KeyError(resource_id)
        live.attributes.update(attributes)


class SimulatedPlatform:
    """Fresh platform state for one trial, and the capability handles over it."""

    def __init__(self, trial_id: str, seed: PlatformSeed) -> None:
        self.trial_id = trial_id
        self.environment_strength = ENVIRONMENT_STRENGTH_SIMULATED
        self._clock = SimulatedClock(seed.start_time)
        self._store = ResourceStore(seed.resources)
        self._approvals = ApprovalService(
            seed.approvals,
            self._clock,
            seed.revocations,
            available=seed.approval_service_available,
            latency_s=seed.approval_service_latency_s,
        )
        self._observer = ProtectedObserver(trial_id, self._clock, self._store.snapshot)
        self._executor = Executor(self._store, self._clock, self._observer.sink())
        self.view = PlatformView(
            trial_id,
            self._approvals,
            self._store,
            self._clock,
            self._executor,
            policy_id=seed.policy_id,
            authorised_approvers=tuple(seed.authorised_approvers),
            governance=seed.governance,
        )
        """The boundary's capability."""
        self.actor = ActorConsole(self._store, self._observer.sink())
        """The actor's capability."""
        self.faults = FaultInjector(self._approvals, self._clock, self._executor, self._store)
        """The harness's fault-injection capability."""

    def elapsed_s(self) -> float:
        """Simulated seconds since the trial started."""
        return self._clock.elapsed_s()

    def settle(self, deadline_s: float) -> None:
        """Run the observer to the declared observation deadline (see `ProtectedObserver`)."""
        self._observer.settle(deadline_s)

    def observer_reader(self) -> ObserverReader:
        """The grader's read-only handle (give it to the grader only)."""
        return self._observer.reader()
