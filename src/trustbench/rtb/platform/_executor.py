"""Resources with revisions and labels, and the executor that applies changes to them.

The executor is the only path that changes a resource's attributes, and it reports every commit to
the protected observer from inside the commit itself. It honours idempotency keys: a retried
dispatch with the key of a committed change returns the original receipt and changes nothing.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

from trustbench.rtb.corpus._models import ParamValue
from trustbench.rtb.platform._clock import SimulatedClock
from trustbench.rtb.platform._models import ControlRequest, ObservedResource, ResourceSeed
from trustbench.rtb.platform._observer import EffectSink


class ResponseLost(Exception):
    """The dispatch may have been committed, but its response never reached the caller."""


@dataclass
class _Resource:
    resource_type: str
    revision: str
    attributes: dict[str, ParamValue]
    labels: dict[str, str] = field(default_factory=dict)

    def observed(self) -> ObservedResource:
        return ObservedResource(
            revision=self.revision,
            attributes=copy.deepcopy(self.attributes),
            labels=dict(self.labels),
        )


class ResourceStore:
    """The platform's resources, keyed by id."""

    def __init__(self, seeds: list[ResourceSeed]) -> None:
        self._items = {
            s.resource_id: _Resource(
                s.resource_type, s.revision, copy.deepcopy(s.attributes), dict(s.labels)
            )
            for s in seeds
        }
        self._unreadable = {s.resource_id for s in seeds if not s.state_readable}

    def get(self, resource_id: str) -> _Resource | None:
        """The live resource (platform-internal; boundaries get `ObservedResource` copies)."""
        return self._items.get(resource_id)

    def readable(self, resource_id: str) -> bool:
        """Whether the resource API serves this resource's state (see `ResourceSeed`)."""
        return resource_id not in self._unreadable

    def snapshot(self) -> dict[str, ObservedResource | None]:
        """A reading of every resource."""
        return {rid: r.observed() for rid, r in sorted(self._items.items())}


class ExecutionReceipt(BaseModel):
    """What the executor tells its caller after a dispatch."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

    status: Literal["committed", "already_committed", "rejected"]
    """`already_committed`: the idempotency key matched an earlier commit; nothing changed."""
    commit_id: str | None = None
    """Commit id, when committed."""
    revision: str | None = None
    """The resource's revision after the commit."""
    detail: str = ""
    """Why a dispatch was rejected."""


class Executor:
    """Applies changes to resources and reports each commit to the observer.

    Args:
        store: The resource store.
        clock: The trial's clock.
        sink: Write-only observer handle.
    """

    def __init__(self, store: ResourceStore, clock: SimulatedClock, sink: EffectSink) -> None:
        self._store = store
        self._clock = clock
        self._sink = sink
        self._done: dict[str, ExecutionReceipt] = {}
        self._lose_next: dict[str, float] = {}
        self._commits = 0

    def lose_next_response(self, target: str, reconciliation_delay_s: float) -> None:
        """Fault: the next commit on `target` succeeds but its response is lost.

        Args:
            target: Resource id.
            reconciliation_delay_s: Simulated seconds until the observer reconciles that target.
        """
        self._lose_next[target] = reconciliation_delay_s

    def execute(self, request: ControlRequest, *, idempotency_key: str) -> ExecutionReceipt:
        """Apply `request` to its target: parameters become attributes, the revision advances.

        Args:
            request: The change to apply.
            idempotency_key: The caller's key; a repeat of a committed key changes nothing.

        Returns:
            The receipt.

        Raises:
            ResponseLost: When the lost-response fault fires (the commit did happen).
        """
        if idempotency_key in self._done:
            first = self._done[idempotency_key]
            return first.model_copy(update={"status": "already_committed"})
        resource = self._store.get(request.target)
        if resource is None:
            return ExecutionReceipt(status="rejected", detail=f"no resource {request.target!r}")
        before = resource.observed()
        self._commits += 1
        commit_id = f"commit-{self._commits}"
        resource.attributes.update(copy.deepcopy(request.parameters))
        resource.revision = f"{resource.revision}.c{self._commits}"
        receipt = ExecutionReceipt(
            status="committed", commit_id=commit_id, revision=resource.revision
        )
        self._done[idempotency_key] = receipt
        mutation = {
            "commit_id": commit_id,
            "committed_at_s": self._clock.elapsed_s(),
            "target": request.target,
            "operation": request.operation,
            "parameters": copy.deepcopy(request.parameters),
            "before": before,
            "after": resource.observed(),
        }
        if request.target in self._lose_next:
            delay = self._lose_next.pop(request.target)
            self._sink.in_doubt(
                delay,
                mutation,
                commit_id=commit_id,
                target=request.target,
                detail="dispatch reached the target; its result is not yet observable",
            )
            raise ResponseLost(f"response for dispatch to {request.target!r} was lost")
        self._sink.mutation(**mutation)
        return receipt
