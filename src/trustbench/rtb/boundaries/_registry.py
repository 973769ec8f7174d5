"""Named boundaries, and the known-bad boundary each fault type must catch.

A name resolves through one `Registry` (`trustbench.core`): the built-in boundaries, then those
a plug-in added with `register_boundary`. A registered name is known to the process that
registered it: register it before freezing and running a spec that names it.

A known-bad boundary is the reference with exactly one safeguard removed. If the fault scenario
aimed at that safeguard does not show a prohibited effect for it, the harness (not the boundary)
is defective, and the audit says so.
"""

from __future__ import annotations

from functools import partial

from trustbench.core import Registry
from trustbench.errors import InputError, did_you_mean
from trustbench.rtb.boundaries._http import HttpBoundary
from trustbench.rtb.boundaries._protocol import BoundaryFactory, PolicyFlaws
from trustbench.rtb.boundaries._python import (
    CedarBoundary,
    PythonPolicyBoundary,
    ReviewGatedBoundary,
    Safeguards,
    UncheckedBoundary,
)
from trustbench.rtb.platform import FaultType

KNOWN_BAD_SAFEGUARDS: dict[str, Safeguards] = {
    "ignores-expiry": Safeguards(policy=PolicyFlaws(check_expiry=False)),
    "authorization-time-only": Safeguards(recheck_at_dispatch=False),
    "retry-without-idempotency": Safeguards(idempotent_retries=False),
    "trusts-recovered-checkpoint": Safeguards(recheck_recovered_authorizations=False),
    "trusts-resource-labels": Safeguards(policy=PolicyFlaws(revision_from_labels=True)),
    "fail-open-when-approval-service-unavailable": Safeguards(
        policy=PolicyFlaws(fail_open_when_unavailable=True)
    ),
    "ignores-operator-stop": Safeguards(honours_operator_stop=False),
}
"""Known-bad boundaries by name: the reference with one safeguard off."""

KNOWN_BAD_FOR_FAULT: dict[FaultType, str] = {
    FaultType.APPROVAL_EXPIRES_WHILE_QUEUED: "ignores-expiry",
    FaultType.APPROVAL_REVOKED_BEFORE_DISPATCH: "authorization-time-only",
    FaultType.RESPONSE_LOST_AFTER_COMMIT: "retry-without-idempotency",
    FaultType.CHECKPOINT_REPLAY_AFTER_REVOCATION: "trusts-recovered-checkpoint",
    FaultType.ACTOR_EDITS_METADATA: "trusts-resource-labels",
    FaultType.APPROVAL_SERVICE_UNAVAILABLE: "fail-open-when-approval-service-unavailable",
    FaultType.OPERATOR_STOP_BEFORE_DISPATCH: "ignores-operator-stop",
}
"""The known-bad boundary each fault type ships with and must catch."""

BOUNDARIES_UNDER_TEST = ("reference", "cedar", "review-gated", "unchecked")
"""The built-in boundaries (besides `http`, which needs a URL, and the known-bad ones)."""


_BOUNDARIES: Registry[BoundaryFactory] = Registry(
    "boundary",
    {
        "reference": PythonPolicyBoundary,
        "cedar": CedarBoundary,
        "review-gated": ReviewGatedBoundary,
        "unchecked": UncheckedBoundary,
        **{
            name: partial(PythonPolicyBoundary, name, safeguards=safeguards)
            for name, safeguards in KNOWN_BAD_SAFEGUARDS.items()
        },
    },
    reserved=("http",),  # built in, but made per URL (`boundary_factory`)
    unregister_with="unregister_boundary",
)
"""Boundary name -> a factory of fresh instances: built in, then registered."""


def register_boundary(name: str, factory: BoundaryFactory) -> None:
    """Make `factory` (a class or zero-argument callable) nameable as `boundary = "<name>"`.

    Raises:
        AlreadyRegistered: `name` is built in or registered already.
    """
    _BOUNDARIES.register(name, factory)


def unregister_boundary(name: str) -> None:
    """Remove a boundary registered with `register_boundary`.

    Raises:
        InputError: `name` is built in, or no boundary of that name is registered.
    """
    _BOUNDARIES.unregister(name)


def boundary_factory(name: str, *, url: str | None = None) -> BoundaryFactory:
    """A factory of fresh instances of the named boundary.

    Args:
        name: `reference`, `cedar`, `review-gated`, `unchecked`, `http`, a known-bad name, or a
            name given to `register_boundary`.
        url: The service root, required for `http` (run it with `HttpEnvironment(url)`).

    Raises:
        InputError: For an unknown name, or `http` without a URL.
    """
    if name == "http":
        if not url:
            raise InputError("boundary `http` needs the service URL (e.g. http://127.0.0.1:8750)")
        return partial(HttpBoundary, url)
    factory = _BOUNDARIES.get(name)
    if factory is not None:
        return factory
    known = _BOUNDARIES.keys()
    hint = did_you_mean(name, [*known, "http"])
    raise InputError(
        f"unknown boundary {name!r}{hint}; known: {', '.join(known)} (or `http` with a URL)"
    )
