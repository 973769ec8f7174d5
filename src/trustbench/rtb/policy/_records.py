"""Record <-> platform-state pieces every policy maps the same way (one copy, not one per policy).

An approval's terms (id, status, operation, target, parameters, revision) and a resource's state
mean the same thing under every built-in policy; what differs (expiry, approvers, issue times,
revocations) stays in each policy's own mapping.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from trustbench.rtb.platform import ResourceSeed

ModelT = TypeVar("ModelT", bound=BaseModel)


def approval_terms(approval: Any) -> dict[str, Any]:
    """The terms an approval record, an approval seed and a live approval share, as fields."""
    return {
        "approval_id": approval.approval_id,
        "status": approval.status,
        "operation": approval.operation,
        "target": approval.target,
        "approved_parameters": dict(approval.approved_parameters),
        "approved_revision": approval.approved_revision,
    }


def resource_seed(record: Any) -> ResourceSeed:
    """A resource-state record as the resource it describes on the simulated platform."""
    return ResourceSeed(
        resource_id=record.resource_id,
        resource_type=record.resource_type,
        revision=record.revision,
        attributes=dict(record.attributes),
    )


def same_named(
    source: BaseModel, target: type[ModelT], convert: Callable[[str, Any], Any], **given: Any
) -> ModelT:
    """A `target` from `given` and every other field of it that `source` has under the same name.

    A governance record of a case and the platform seed it becomes (and the record a boundary
    writes back) carry the same fields under the same names, but for their ids; what differs is
    the form of a value (an instant is text in a record, a datetime in a seed), which `convert`
    (field name, value) supplies.
    """
    shared = [n for n in target.model_fields if n in type(source).model_fields and n not in given]
    return target(**given, **{n: convert(n, getattr(source, n)) for n in shared})
