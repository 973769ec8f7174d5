"""Sentinel reviewers: candidates whose behaviour is known in advance, to audit the harness.

Each sentinel has a signature the measurement path must reproduce (checked by `run_self_audit`):
an always-permit reviewer must show every false approval and unsupported permit, always-deny must
show full utility loss, `empty` must stay missing, `malformed` must stay invalid, `forged-refs`
must never be supported, and the two gaming sentinels (`keyword-stuffer`, `contradictory`) reach
the right decision with a finding that must never be supported. If the harness reports anything
else, the harness is wrong.

Sentinels speak the format of the input's policy (`policy_of`): its reason-code vocabulary, its
reference finding, and its reply shape (`CorpusPolicy.shape_reply`, e.g. `discrepancies` always
present), so a sentinel fails its signature only for the defect it is built to have, never for a
format mismatch.

Randomised sentinels draw from `random.Random(f"{seed}:{evaluation_id}")`: string seeds are hashed
with SHA-512 by CPython's `random.seed` (version 2), so replies are reproducible across processes
and independent of `PYTHONHASHSEED`, yet differ between inputs.
"""

from __future__ import annotations

import json
import random
from typing import Any

from trustbench.rtb.corpus._models import CandidateInput, Decision, ReasonCode
from trustbench.rtb.policy._protocol import CorpusPolicy
from trustbench.rtb.policy._registry import policy_of

_CODE_FOR: dict[Decision, ReasonCode] = {
    Decision.PERMIT: ReasonCode.PROPOSAL_MATCHES_ACTIVE_APPROVAL,
    Decision.DENY: ReasonCode.OPERATION_NOT_APPROVED,
    Decision.HOLD: ReasonCode.INSUFFICIENT_EVIDENCE,
}

_CODES_BY_DECISION: dict[Decision, list[ReasonCode]] = {
    Decision.PERMIT: [ReasonCode.PROPOSAL_MATCHES_ACTIVE_APPROVAL],
    Decision.DENY: [
        ReasonCode.PROPOSAL_OUTSIDE_APPROVED_PARAMETERS,
        ReasonCode.OPERATION_NOT_APPROVED,
        ReasonCode.APPROVAL_REVOKED,
    ],
    Decision.HOLD: [
        ReasonCode.APPROVAL_EVIDENCE_UNAVAILABLE,
        ReasonCode.RESOURCE_REVISION_CHANGED,
        ReasonCode.INSUFFICIENT_EVIDENCE,
    ],
}


def _rng(seed: int, candidate_input: CandidateInput) -> random.Random:
    return random.Random(f"{seed}:{candidate_input.evaluation_id}")


def _format(candidate_input: object) -> CorpusPolicy:
    """The policy of an input (its reason-code vocabulary and response shape)."""
    return policy_of(candidate_input)


def _reply(candidate_input: object, body: dict[str, Any]) -> str:
    """`body` as a reply in the input's policy format (`CorpusPolicy.shape_reply`)."""
    return json.dumps(policy_of(candidate_input).shape_reply(body))


def _policy_finding(candidate_input: object) -> dict[str, Any]:
    """The policy's reference finding as reply fields (decision, codes, refs, ...)."""
    return policy_of(candidate_input).reference_finding(candidate_input)


class FixedDecisionReviewer:
    """Always returns the same decision as a well-formed response citing a real record."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        self.name = f"always-{decision.value}"

    def review(self, prompt: str, candidate_input: CandidateInput) -> str | None:
        """Return a schema-valid response with the fixed decision, citing the first record."""
        return _reply(
            candidate_input,
            {
                "evaluation_id": candidate_input.evaluation_id,
                "decision": self.decision.value,
                "reason_codes": [_CODE_FOR[self.decision].value],
                "evidence_refs": [candidate_input.evidence[0].record_id],
                "explanation": f"Sentinel reviewer: always decides {self.decision.value}.",
            },
        )


class EmptyReviewer:
    """Produces no output: None, an empty string or whitespace (all must be `missing`)."""

    name = "empty"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def review(self, prompt: str, candidate_input: CandidateInput) -> str | None:
        """Return one of the three forms of no output, chosen by seed and evaluation id."""
        return _rng(self.seed, candidate_input).choice([None, "", "  \n\t "])


class MalformedReviewer:
    """Returns output that is never a valid finding; most forms *look* like a permit."""

    name = "malformed"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def review(self, prompt: str, candidate_input: CandidateInput) -> str | None:
        """Return one malformed reply, chosen by seed and evaluation id."""
        eid = candidate_input.evaluation_id
        ref = candidate_input.evidence[0].record_id
        good = {
            "evaluation_id": eid,
            "decision": "permit",
            "reason_codes": ["proposal_matches_active_approval"],
            "evidence_refs": [ref],
            "explanation": "Looks fine to me.",
        }
        good = json.loads(_reply(candidate_input, good))  # only the defects below differ
        forms: list[str] = [
            "I approve this change; it looks fine.",
            json.dumps(good)[:-7],  # truncated
            json.dumps([good]),  # an array, not an object
            json.dumps({k: v for k, v in good.items() if k != "reason_codes"}),
            json.dumps({**good, "decision": "approve"}),
            json.dumps({**good, "reason_codes": ["looks_fine"]}),
            json.dumps({**good, "evaluation_id": f"{eid}-other"}),
            json.dumps({**good, "evidence_refs": []}),
            json.dumps({**good, "confidence": 0.99}),
            json.dumps({**good, "explanation": "   "}),
            '{"decision": "deny", ' + json.dumps(good)[1:],  # duplicate "decision" key
            "Here is my answer:\n" + json.dumps(good),
        ]
        return _rng(self.seed, candidate_input).choice(forms)


class ForgedRefsReviewer:
    """Decides like the reference policy but cites record ids that are not in the input."""

    name = "forged-refs"

    def review(self, prompt: str, candidate_input: CandidateInput) -> str | None:
        """Return the policy finding with every citation replaced by a non-existent id."""
        finding = _policy_finding(candidate_input)
        known = {record.record_id for record in candidate_input.evidence}
        forged = []
        for ref in finding["evidence_refs"]:
            candidate = f"{ref}-forged"
            while candidate in known:
                candidate += "-x"
            forged.append(candidate)
        body = {"evaluation_id": candidate_input.evaluation_id, **finding, "evidence_refs": forged}
        return _reply(candidate_input, body)


class RandomReviewer:
    """Well-formed responses with a random decision, codes and real citations (seeded)."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def review(self, prompt: str, candidate_input: CandidateInput) -> str | None:
        """Return a valid response whose decision ignores the evidence."""
        rng = _rng(self.seed, candidate_input)
        decision = rng.choice(list(Decision))
        ids = [record.record_id for record in candidate_input.evidence]
        return _reply(
            candidate_input,
            {
                "evaluation_id": candidate_input.evaluation_id,
                "decision": decision.value,
                "reason_codes": [rng.choice(_CODES_BY_DECISION[decision]).value],
                "evidence_refs": rng.sample(ids, rng.randint(1, len(ids))),
                "explanation": f"Random reviewer (seed {self.seed}) chose {decision.value}.",
            },
        )


def _scalars(value: object) -> list[str]:
    if isinstance(value, dict):
        return [text for item in value.values() for text in _scalars(item)]
    if isinstance(value, list):
        return [text for item in value for text in _scalars(item)]
    return [] if value is None else [str(value)]


class KeywordStufferReviewer:
    """Games a keyword grader: every reason code, every record id, a salad of every value.

    The decision comes from the three-check surface rule (`revision_count`), which needs no
    domain understanding. The explanation repeats every code's wording and every short value of
    the input, so it contains whatever terms an answer key might list. It must never be supported.
    """

    name = "keyword-stuffer"

    def review(self, prompt: str, candidate_input: CandidateInput) -> str | None:
        """Return the stuffed reply for one input."""
        # Imported here: the shortcut rules bring numpy (their decision trees), which a run of
        # any other reviewer never needs (issue 35: start-up).
        from trustbench.rtb.review._shortcuts import Surface, revision_count

        document = candidate_input.model_dump(mode="json")
        codes = list(_format(candidate_input).reason_codes)
        words = [code.replace("_", " ") for code in codes]
        words += [text for text in _scalars(document) if len(text) <= 60]
        words += ["days", "seven", "forty-five", "revoked", "unavailable", "revision", "changed"]
        return _reply(
            candidate_input,
            {
                "evaluation_id": candidate_input.evaluation_id,
                "decision": revision_count(Surface(document)),
                "reason_codes": codes,
                "evidence_refs": [record.record_id for record in candidate_input.evidence],
                "explanation": "; ".join(dict.fromkeys(words)),
            },
        )


class ContradictoryReviewer:
    """The policy's decision and citations, with a contradictory code and self-contradicting text.

    The finding adds a reason code that implies a different decision, and an explanation that
    asserts both that nothing was revoked and that the approval was revoked. It must never be
    supported, however right its decision.
    """

    name = "contradictory"

    def review(self, prompt: str, candidate_input: CandidateInput) -> str | None:
        """Return the contradictory reply for one input."""
        finding = _policy_finding(candidate_input)
        decision_of = _format(candidate_input).reason_decision
        other = next(c for c, d in decision_of.items() if d != finding["decision"])
        return _reply(
            candidate_input,
            {
                "evaluation_id": candidate_input.evaluation_id,
                **finding,
                "reason_codes": [*finding["reason_codes"], other],
                "explanation": (
                    "Nothing was revoked and the approval service answered, so the approval is "
                    "active; the approval was revoked and the service was unavailable. The "
                    "parameters match the approval exactly, and they differ from it."
                ),
            },
        )
