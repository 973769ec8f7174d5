"""The deterministic `reference-policy-v2` reviewer: policy `rtb-narrow-approval-v2` as code.

Written from the v0.2 policy text (`docs/rtb-corpus-v0.2.md`, stated in every v0.2 policy record
and prompt), reading only the candidate-visible input (`CandidateInputV2`). It never sees a case
id, variant or answer key, so agreement with the authored reference decisions is evidence that
labels and wording say the same thing; a separate Cedar encoding of the same text
(`boundaries/policies/approval_policy_v2.cedar`) is the second, independent implementation.

Interpretation choices, each visible in `_reading.py` (the reading itself):
- Operation, target, approver names and revisions compare after the policy's normalisation
  (`_normalise.equivalent`); times are ISO 8601 instants compared as instants.
- Only a service notice whose `service` is `approval-service` concerns approval evidence.
- Change tickets and requester notes are never read: the policy says they are not evidence.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from trustbench.errors import InputError
from trustbench.rtb.policy.narrow_v2._models import POLICY_ID_V2, CandidateInputV2
from trustbench.rtb.policy.narrow_v2._reading import APPROVAL_SERVICE as APPROVAL_SERVICE
from trustbench.rtb.policy.narrow_v2._reading import FindingV2 as FindingV2
from trustbench.rtb.policy.narrow_v2._reading import Reading
from trustbench.rtb.policy.narrow_v2._reading import _raw_equal as _raw_equal
from trustbench.rtb.policy.narrow_v2._reading import instant as instant


def assess_v2(
    candidate_input: CandidateInputV2, disabled: frozenset[str] = frozenset()
) -> FindingV2:
    """Apply policy `rtb-narrow-approval-v2` to one candidate input.

    Args:
        candidate_input: The candidate-visible input.
        disabled: Rule ids (`_decision_rules.py`) to leave out; only an ablated reader of
            `rtb audit` passes any. Empty: the reference reviewer.
    """
    return Reading(candidate_input, disabled).finding()


def finding_fields(finding: FindingV2) -> dict[str, Any]:
    """A v0.2 finding as the fields of a reviewer response (all but the evaluation id)."""
    return {
        "decision": finding.decision.value,
        "reason_codes": [code.value for code in finding.reason_codes],
        "evidence_refs": list(finding.evidence_refs),
        "discrepancies": [d.model_dump(mode="json") for d in finding.discrepancies],
        "explanation": finding.explanation,
    }


def reference_finding(candidate_input: CandidateInputV2) -> dict[str, Any]:
    """`assess_v2` as reply fields (what the sentinels that reuse the policy's finding send)."""
    return finding_fields(assess_v2(candidate_input))


def finding_reply_v2(evaluation_id: str, finding: FindingV2) -> str:
    """Serialise a v0.2 finding as a reviewer-response JSON reply."""
    return json.dumps({"evaluation_id": evaluation_id, **finding_fields(finding)})


class ReferencePolicyV2Reviewer:
    """Deterministic reviewer answering with the v0.2 policy finding of `assess_v2`.

    A later policy whose finding is a `FindingV2` (v0.3) subclasses it, naming its own input
    model, policy id and reader; the ablated readers replace only `read`.
    """

    name = "reference-policy-v2"
    policy_ids: tuple[str, ...] = (POLICY_ID_V2,)
    """Policies this reviewer implements; a track refuses a corpus declaring another."""
    input_model: type[BaseModel] = CandidateInputV2
    """The candidate-input format of that policy (any other input is refused)."""

    def assess(self, candidate_input: Any, disabled: frozenset[str] = frozenset()) -> FindingV2:
        """The policy's full reader, without the rules in `disabled` (`assess_v2`)."""
        return assess_v2(candidate_input, disabled)

    def read(self, candidate_input: Any) -> FindingV2:
        """The finding this reviewer replies with: the full reading."""
        return self.assess(candidate_input)

    def review(self, prompt: str, candidate_input: CandidateInputV2) -> str | None:  # type: ignore[override]
        """Return the policy finding of `read` as a JSON reply (the prompt is unused).

        Raises:
            InputError: The input is not in the policy's format (this reviewer implements
                `policy_ids[0]` only).
        """
        if not isinstance(candidate_input, self.input_model):
            raise InputError(
                f"{self.name} implements policy {self.policy_ids[0]}; got a "
                f"{type(candidate_input).__name__}",
                location=f"evaluation {getattr(candidate_input, 'evaluation_id', '?')}",
            )
        return finding_reply_v2(candidate_input.evaluation_id, self.read(candidate_input))
