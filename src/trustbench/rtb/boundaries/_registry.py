"""Named boundaries, and the known-bad boundary each fault type must catch.

A known-bad boundary is the reference with exactly one safeguard removed. If the fault scenario
aimed at that safeguard does not show a prohibited effect for it, the harness (not the boundary)
is defective, and the audit says so.
"""

from __future__ import annotations

from functools import partial

from trustbench.errors import InputError, did_you_mean
from trustbench.rtb.boundaries._cedar import CedarBoundary
from trustbench.rtb.boundaries._http import HttpBoundary
from trustbench.rtb.boundaries._policy import PolicyFlaws
from trustbench.rtb.boundaries._protocol import BoundaryFactory
from trustbench.rtb.boundaries._python import (
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
}
"""Known-bad boundaries by name: the reference with one safeguard off."""

KNOWN_BAD_FOR_FAULT: dict[FaultType, str] = {
    FaultType.APPROVAL_EXPIRES_WHILE_QUEUED: "ignores-expiry",
    FaultType.APPROVAL_REVOKED_BEFORE_DISPATCH: "authorization-time-only",
    FaultType.RESPONSE_LOST_AFTER_COMMIT: "retry-without-idempotency",
    FaultType.CHECKPOINT_REPLAY_AFTER_REVOCATION: "trusts-recovered-checkpoint",
    FaultType.ACTOR_EDITS_METADATA: "trusts-resource-labels",
    FaultType.APPROVAL_SERVICE_UNAVAILABLE: "fail-open-when-approval-service-unavailable",
}
"""The known-bad boundary each fault type ships with and must catch."""

BOUNDARIES_UNDER_TEST = ("reference", "cedar", "review-gated", "unchecked")
"""The built-in boundaries (besides `http`, which needs a URL, and the known-bad ones)."""


def boundary_factory(name: str, *, url: str | None = None) -> BoundaryFactory:
    """A factory of fresh instances of the named boundary.

    Args:
        name: `reference`, `cedar`, `review-gated`, `unchecked`, `http`, or a known-bad name.
        url: The service root, required for `http` (run it with `HttpEnvironment(url)`).

    Raises:
        InputError: For an unknown name, or `http` without a URL.
    """
    if name == "http":
        if not url:
            raise InputError("boundary `http` needs the service URL (e.g. http://127.0.0.1:8750)")
        return partial(HttpBoundary, url)
    if name == "reference":
        return PythonPolicyBoundary
    if name == "cedar":
        return CedarBoundary
    if name == "review-gated":
        return ReviewGatedBoundary
    if name == "unchecked":
        return UncheckedBoundary
    if name in KNOWN_BAD_SAFEGUARDS:
        return partial(PythonPolicyBoundary, name, safeguards=KNOWN_BAD_SAFEGUARDS[name])
    known = ", ".join([*BOUNDARIES_UNDER_TEST, *KNOWN_BAD_SAFEGUARDS])
    hint = did_you_mean(name, [*BOUNDARIES_UNDER_TEST, *KNOWN_BAD_SAFEGUARDS, "http"])
    raise InputError(f"unknown boundary {name!r}{hint}; known: {known} (or `http` with a URL)")
