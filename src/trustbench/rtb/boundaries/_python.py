"""Python boundaries: the `reference` boundary and its known-bad variants.

`PythonPolicyBoundary` evaluates the policy the platform declares (asking that policy's object in
`trustbench.rtb.policy` for its live evaluation) at authorization *and again right before
commit*, dispatches with the request's idempotency key, and retries a lost response with the
same key. Each known-bad variant flips exactly one of those safeguards, so the fault
scenario aimed at that safeguard must catch it; if it does not, the harness is defective.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from trustbench.errors import InputError
from trustbench.rtb.boundaries._protocol import (
    Authorization,
    DispatchReceipt,
    Enforcement,
    PolicyFlaws,
    PolicyResult,
)
from trustbench.rtb.corpus._models import Decision, ReasonCode
from trustbench.rtb.platform import ControlRequest, PlatformView, ResponseLost
from trustbench.rtb.policy._protocol import LiveEvaluator
from trustbench.rtb.policy._registry import policy_for

OPERATOR_STOP_DETAIL = "an operator stop is in force for this resource"
"""What the reference boundary says when it refuses a request under an operator stop."""

Engine = Literal["reference", "cedar"]
"""Which of a policy's encodings decides (every built-in policy supplies both)."""


@dataclass(frozen=True)
class Safeguards:
    """The dispatch-path safeguards of the reference boundary (all on by default)."""

    recheck_at_dispatch: bool = True
    """Re-evaluate live state right before commit (catches revocation or expiry after
    authorization)."""
    recheck_recovered_authorizations: bool = True
    """Re-evaluate authorizations issued by another (pre-crash) instance."""
    idempotent_retries: bool = True
    """Retry a lost response with the same idempotency key."""
    honours_operator_stop: bool = True
    """Refuse, at authorization and again right before commit, a request for a resource an
    operator stopped (the platform's stop service, `PlatformView.stop_in_force`)."""
    policy: PolicyFlaws = field(default_factory=PolicyFlaws)
    """Flaws in the policy evaluation itself."""


class PythonPolicyBoundary:
    """The starter policy in Python, enforced at dispatch.

    Args:
        name: Name recorded with results.
        safeguards: Which safeguards are on (known-bad variants turn one off).
        approval_timeout_s: Approval queries slower than this count as unavailable (hold).
        max_attempts: Executor calls per dispatch when responses are lost.
    """

    def __init__(
        self,
        name: str = "reference",
        *,
        safeguards: Safeguards = Safeguards(),
        approval_timeout_s: float = 10.0,
        max_attempts: int = 3,
    ) -> None:
        self.name = name
        self._safeguards = safeguards
        self._timeout = approval_timeout_s
        self._max_attempts = max_attempts
        self._instance = secrets.token_hex(8)
        self._evaluators: dict[str, LiveEvaluator] = {}
        self.enforcement: Enforcement = "enforcing" if safeguards == Safeguards() else "known-bad"

    engine: Engine = "reference"
    """Which of the policy's encodings decides (`cedar` in `CedarBoundary`)."""

    def _evaluate(self, request: ControlRequest, platform: PlatformView) -> PolicyResult:
        """Decide under the policy the platform declares; an unknown policy fails closed."""
        evaluator = self._evaluators.get(platform.policy_id)
        if evaluator is None:
            try:
                policy = policy_for(platform.policy_id)
            except InputError:
                return PolicyResult(
                    Decision.HOLD,
                    ReasonCode.INSUFFICIENT_EVIDENCE,
                    detail=f"policy {platform.policy_id!r} is not implemented by this boundary",
                )
            evaluator = policy.live_evaluator(
                self.engine, approval_timeout_s=self._timeout, flaws=self._safeguards.policy
            )
            self._evaluators[platform.policy_id] = evaluator
        return evaluator.evaluate(request, platform)

    def _stopped(self, request: ControlRequest, platform: PlatformView) -> bool:
        """Whether an operator stop covers the request's target (and this boundary honours it)."""
        return self._safeguards.honours_operator_stop and platform.stop_in_force(request.target)

    async def authorize(self, request: ControlRequest, platform: PlatformView) -> Authorization:
        """Evaluate the policy on live state: its decision, reason, approval and detail.

        Under an operator stop the answer is a hold, whatever the policy says: a stop outranks
        every approval until the operator lifts it.
        """
        if self._stopped(request, platform):
            return Authorization(
                decision=Decision.HOLD,
                reason_code=ReasonCode.INSUFFICIENT_EVIDENCE,
                detail=OPERATOR_STOP_DETAIL,
                issued_by=self._instance,
            )
        result = self._evaluate(request, platform)
        return Authorization(
            decision=result.decision,
            reason_code=result.reason_code,
            approval_id=result.approval_id,
            detail=result.detail,
            issued_by=self._instance,
        )

    async def dispatch(
        self,
        request: ControlRequest,
        authorization: Authorization | None,
        platform: PlatformView,
    ) -> DispatchReceipt:
        """Refuse without a permit; re-check live state before commit; retry idempotently."""
        if authorization is None or authorization.decision != Decision.PERMIT:
            decision = authorization.decision if authorization else Decision.HOLD
            reason = (
                authorization.reason_code if authorization else ReasonCode.INSUFFICIENT_EVIDENCE
            )
            return DispatchReceipt(status="blocked", decision=decision, reason_code=reason)
        if self._stopped(request, platform):  # a stop issued after authorization
            return DispatchReceipt(
                status="blocked",
                decision=Decision.HOLD,
                reason_code=ReasonCode.INSUFFICIENT_EVIDENCE,
                detail=OPERATOR_STOP_DETAIL,
            )
        recovered = authorization.issued_by != self._instance
        recheck = self._safeguards.recheck_at_dispatch and (
            not recovered or self._safeguards.recheck_recovered_authorizations
        )
        if recheck:
            live = self._evaluate(request, platform)
            if live.decision != Decision.PERMIT:
                return DispatchReceipt(
                    status="blocked",
                    decision=live.decision,
                    reason_code=live.reason_code,
                    detail="re-check before commit failed",
                )
        return execute_with_retries(
            request,
            platform,
            max_attempts=self._max_attempts,
            idempotent=self._safeguards.idempotent_retries,
        )


def execute_with_retries(
    request: ControlRequest, platform: PlatformView, *, max_attempts: int, idempotent: bool
) -> DispatchReceipt:
    """Call the executor, retrying when the response is lost.

    With `idempotent=True` every attempt carries the request id as its idempotency key, so a retry
    after a committed-but-lost response changes nothing; with `False` each attempt gets a fresh key
    (the known-bad behaviour that double-applies).
    """
    for attempt in range(1, max_attempts + 1):
        key = request.request_id if idempotent else f"{request.request_id}/{secrets.token_hex(4)}"
        try:
            receipt = platform.execute(request, idempotency_key=key)
        except ResponseLost:
            continue
        if receipt.status == "rejected":
            return DispatchReceipt(status="error", attempts=attempt, detail=receipt.detail)
        return DispatchReceipt(status="executed", commit_id=receipt.commit_id, attempts=attempt)
    return DispatchReceipt(
        status="unknown", attempts=max_attempts, detail="every response was lost"
    )


class _ExecutesEverything:
    """A dispatch path that checks nothing (what `unchecked` and `review-gated` share)."""

    async def dispatch(
        self,
        request: ControlRequest,
        authorization: Authorization | None,
        platform: PlatformView,
    ) -> DispatchReceipt:
        """Execute without checking any approval, retrying idempotently on a lost response."""
        return execute_with_retries(request, platform, max_attempts=3, idempotent=True)


class UncheckedBoundary(_ExecutesEverything):
    """Executes everything: what happens without the tested assurance layer (simulator only)."""

    enforcement: Enforcement = "built-to-fail"
    """It enforces nothing: a violation through it is the expected, detected failure."""

    def __init__(self, name: str = "unchecked") -> None:
        self.name = name
        self._instance = secrets.token_hex(8)

    async def authorize(self, request: ControlRequest, platform: PlatformView) -> Authorization:
        """Permit without looking."""
        return Authorization(
            decision=Decision.PERMIT,
            reason_code=ReasonCode.PROPOSAL_MATCHES_ACTIVE_APPROVAL,
            issued_by=self._instance,
            detail="unchecked: nothing was checked",
        )


class ReviewGatedBoundary(_ExecutesEverything):
    """The spec's cautionary design: a reviewer gates the application, not the executor.

    `authorize` asks the reviewer (by default a correct one: the starter policy on live state), so
    the review itself may well catch the problem. `dispatch` is the executor endpoint the
    application fronts; it executes whatever reaches it and never checks an approval, trusting that
    callers went through review. A request presented directly therefore bypasses the review.

    Args:
        name: Name recorded with results.
        approval_timeout_s: Passed to the default reviewer.
    """

    enforcement: Enforcement = "built-to-fail"
    """Its executor enforces nothing: a request presented directly bypasses the review."""

    def __init__(self, name: str = "review-gated", *, approval_timeout_s: float = 10.0) -> None:
        self.name = name
        self._reviewer = PythonPolicyBoundary("reviewer", approval_timeout_s=approval_timeout_s)

    async def authorize(self, request: ControlRequest, platform: PlatformView) -> Authorization:
        """The reviewer's verdict (advisory: nothing downstream enforces it)."""
        return await self._reviewer.authorize(request, platform)


# ------------------------------------------------------------------------------------------------
# The `cedar` boundary: the corpus policy's Cedar encoding, enforced at dispatch.
#
# Only the policy evaluation differs from `reference`: the policy object of the platform's declared
# policy supplies its Cedar encoding (`CorpusPolicy.live_evaluator("cedar", ...)`), and
# authorization, the re-check right before commit and idempotent dispatch are the same enforcement
# path as `reference` (inherited), with every safeguard on.


class CedarBoundary(PythonPolicyBoundary):
    """The platform's policy enforced by the Cedar engine (cedarpy).

    Args:
        name: Name recorded with results.
        approval_timeout_s: Approval queries slower than this count as unavailable (hold).
        max_attempts: Executor calls per dispatch when responses are lost.
    """

    engine: Engine = "cedar"
    """The policy's Cedar encoding decides."""

    def __init__(
        self, name: str = "cedar", *, approval_timeout_s: float = 10.0, max_attempts: int = 3
    ) -> None:
        super().__init__(name, approval_timeout_s=approval_timeout_s, max_attempts=max_attempts)

    def linked_approval_ids(self) -> list[str]:
        """Approvals whose template link is in the policy set now (encodings that link them).

        Empty before the first evaluation and for an encoding without template links.
        """
        linked: list[str] = []
        for evaluator in self._evaluators.values():
            method: Callable[[], list[str]] | None = getattr(evaluator, "linked_approval_ids", None)
            if callable(method):
                linked += method()
        return sorted(linked)
