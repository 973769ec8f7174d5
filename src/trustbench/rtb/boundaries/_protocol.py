"""The one interface every boundary under test implements: authorize, then dispatch.

A boundary reads approvals and resources through the platform's service APIs (`PlatformView`) and
asks the executor to apply changes; it never receives the observer. What a boundary returns is its
own *claim* (recorded for diagnosis and timing); outcomes are decided from the observer alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Literal, Protocol, runtime_checkable

from pydantic import AfterValidator, BaseModel

from trustbench._canonical import canonical_json
from trustbench._docstrings import documented
from trustbench.rtb.corpus._models import Decision, ParamValue
from trustbench.rtb.platform import ControlRequest, PlatformView

Enforcement = Literal["enforcing", "built-to-fail", "known-bad"]
"""What a boundary declares it is, which decides how a track judges a failure through it:

- `enforcing`: meant to stop every prohibited effect; a failure is the boundary's (a candidate's)
  failure and blocks release.
- `built-to-fail`: enforces nothing by design (`unchecked`, `review-gated`); a violation through
  it is the expected, detected failure of a measurement instrument.
- `known-bad`: a correct boundary with one safeguard removed; the fault aimed at that safeguard
  must show a prohibited effect, or the harness is defective.
"""

DEFAULT_ENFORCEMENT: Enforcement = "enforcing"
"""What a boundary that declares nothing is taken to be: judged as a candidate, never excused."""


def _known_reason_code(code: str) -> str:
    """A reason code of some registered policy (a boundary's reply is checked, not trusted)."""
    from trustbench.rtb.policy._registry import holds_reason_code

    if not holds_reason_code(code):
        raise ValueError(f"reason code {code!r} is in no registered policy's vocabulary")
    return code


ReasonCodeValue = Annotated[str, AfterValidator(_known_reason_code)]
"""A reason code in the vocabulary of a registered policy (the one in force on the platform)."""


def enforcement_of(boundary: object) -> Enforcement:
    """The enforcement class a boundary declares (`enforcement`), else `DEFAULT_ENFORCEMENT`.

    Raises:
        ValueError: It declares something other than the three classes.
    """
    declared = getattr(boundary, "enforcement", DEFAULT_ENFORCEMENT)
    if declared not in ("enforcing", "built-to-fail", "known-bad"):
        raise ValueError(
            f"boundary {getattr(boundary, 'name', '?')!r} declares enforcement {declared!r}; "
            "expected enforcing, built-to-fail or known-bad"
        )
    return declared


def is_instrument(enforcement: Enforcement) -> bool:
    """Whether a boundary declaring `enforcement` is a measurement instrument, not a candidate.

    The one rule both tracks classify by (control: `ControlRunGrades.instruments`; workflow:
    `built_to_fail`): a boundary that declares `built-to-fail` or `known-bad` is an instrument
    whose failure is the expected, detected signature; one that declares `enforcing` (or nothing,
    see `enforcement_of`) is judged as a candidate, and its failure blocks release. Never a name.
    """
    return enforcement != "enforcing"


class _Frozen(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class Authorization(_Frozen):
    """A boundary's authorization answer for one request (serializable: it can be checkpointed)."""

    decision: Decision
    """permit, deny or hold, as the boundary decided."""
    reason_code: ReasonCodeValue
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
    reason_code: ReasonCodeValue | None = None
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
    enforcement: Enforcement
    """What the boundary is (see `Enforcement`); read by `enforcement_of`, which takes a
    boundary that omits it as `enforcing`."""

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


# ------------------------------------------------------------------------------------------------
# What every policy's live evaluation shares: its result, the known-bad flaws, canonical values.
#
# Each corpus policy evaluates itself on live platform state (`CorpusPolicy.live_evaluator`, in
# `trustbench.rtb.policy`); the boundaries only call it. The grader never does: outcomes come from
# the observer and the case's authored reference decision, so the assessment can contradict any
# boundary's implementation.

DECLARED_REVISION_LABEL = "declared-revision"
"""An actor-writable label; only the `trusts-resource-labels` known-bad boundary believes it."""


@dataclass(frozen=True)
class PolicyFlaws:
    """Deliberate flaws for known-bad boundaries; the defaults are the correct behaviour."""

    check_expiry: bool = True
    """False: an expired approval still counts as active."""
    revision_from_labels: bool = False
    """True: read the current revision from an actor-writable label when present."""
    fail_open_when_unavailable: bool = False
    """True: treat an unavailable approval service as approval."""


@dataclass(frozen=True)
class PolicyResult:
    """A policy decision with its reason and the approval it rests on."""

    decision: Decision
    reason_code: str
    """A code of the vocabulary of the policy in force (a `StrEnum` member)."""
    approval_id: str | None = None
    detail: str = ""


def canonical_parameters(parameters: dict[str, ParamValue]) -> bytes:
    """RFC 8785 canonical JSON, so `true` never equals `1` and key order never matters."""
    return canonical_json(parameters)
