"""What every policy's live evaluation shares: its result, the known-bad flaws, canonical values.

Each corpus policy evaluates itself on live platform state (`CorpusPolicy.live_evaluator`, in
`trustbench.rtb.policy`); the boundaries only call it. The grader never does: outcomes come from
the observer and the case's authored reference decision, so the assessment can contradict any
boundary's implementation.
"""

from __future__ import annotations

from dataclasses import dataclass

from trustbench._canonical import canonical_json
from trustbench.rtb.corpus._models import Decision, ParamValue

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
