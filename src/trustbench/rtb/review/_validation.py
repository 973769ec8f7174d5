"""Turn a reviewer's raw reply into an outcome, and judge whether a valid finding is supported.

Two steps, two sides of the information boundary:

- `validate_response` sees only what the reviewer saw (the `CandidateInput`) and decides the
  *outcome*: `permit`, `deny`, `hold`, `missing` or `invalid`. Only a valid response whose decision
  is `permit` is approval; a missing or malformed reply never is.
- `is_supported` is grader-side: it takes the authored `Case` (with its answer key) and decides
  whether a valid finding reaches the reference decision *for the decisive reasons*: consistent
  reason codes, precise citations and (in a policy whose responses carry them) structured
  discrepancies. The explanation
  text is kept for people to read and never keyword-scored.

Schema checking uses `jsonschema` (Draft 2020-12) against the response model of the corpus's policy
(`CorpusPolicy.response_model`, from `trustbench.rtb.policy`), found by the type of the candidate
input the reply answers (`policy_of`), so the reported reason carries a JSON pointer; the pydantic
model is then built from the same object (it cannot fail once the schema passed, but it gives the
typed value).

`report` grades through `_reply_grader.ReplyGrader`: the same results as `validate_response`
then `support_gaps`, with each distinct reply of a case (but for its fresh evaluation id) graded
once.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny

from trustbench.rtb.policy._finding_rules import CitationRule
from trustbench.rtb.policy._protocol import (
    AuthoredCase,
    CandidateInput,
    CorpusPolicy,
    ReviewFinding,
)
from trustbench.rtb.policy._registry import policy_of
from trustbench.rtb.review._answer_key import answer_key
from trustbench.rtb.review._extraction import extract_answer
from trustbench.rtb.review._findings import discrepancy_gaps
from trustbench.rtb.review._rows import Outcome

if TYPE_CHECKING:  # imported on first validation: `run` only records replies (start-up, issue 35)
    from jsonschema import Draft202012Validator

_VALIDATORS: dict[str, Draft202012Validator] = {}
"""Schema validator per policy id, built on first use."""


def _validator(corpus_format: CorpusPolicy) -> Draft202012Validator:
    if corpus_format.policy_id not in _VALIDATORS:
        from jsonschema import Draft202012Validator

        schema = corpus_format.response_model.model_json_schema()
        _VALIDATORS[corpus_format.policy_id] = Draft202012Validator(schema)
    return _VALIDATORS[corpus_format.policy_id]


if TYPE_CHECKING:
    Finding = ReviewFinding | None
else:
    # An instance of the policy's own response model, serialized as the model it is;
    # `ReviewFinding` says what the harness may read of any of them.
    Finding = SerializeAsAny[BaseModel] | None


class ValidatedResponse(BaseModel):
    """The outcome of validating one raw reply against the input it answers."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    outcome: Outcome
    """permit/deny/hold for a valid response; missing or invalid otherwise."""
    response: Finding = None
    """The parsed response (of the corpus policy's response model); set only for a decision."""
    invalid_reason: str | None = Field(default=None)
    """Why the reply is invalid (names the JSON pointer or the offending value); None otherwise."""

    @property
    def is_approval(self) -> bool:
        """True only for a valid response deciding permit; missing/invalid are never approval."""
        return self.outcome is Outcome.PERMIT and self.response is not None


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # A reply with two "decision" keys is ambiguous; json.loads would silently keep the last one.
    found = dict(pairs)
    if len(found) != len(pairs):  # only then are the duplicates named (a quadratic count)
        keys = [key for key, _ in pairs]
        duplicates = sorted({key for key in keys if keys.count(key) > 1})
        raise ValueError(f"duplicate key(s) {duplicates}")
    return found


_DECODER = json.JSONDecoder(object_pairs_hook=_reject_duplicate_keys)
"""`json.loads(text, object_pairs_hook=_reject_duplicate_keys)` without building a decoder per
reply (`_loads`)."""


def _loads(text: str) -> Any:
    """`json.loads(text, object_pairs_hook=_reject_duplicate_keys)`, same value, same errors."""
    if text.startswith("\ufeff"):  # json.loads's own refusal of a BOM, with its message
        return json.loads(text, object_pairs_hook=_reject_duplicate_keys)
    return _DECODER.decode(text)


def _pointer(path: Any) -> str:
    return "/" + "/".join(str(part) for part in path) if path else "/"


_PLAIN_ROOT = frozenset({"type", "properties", "required", "additionalProperties", "title",
                         "description", "$defs"})  # fmt: skip
_PLAIN_STRING = frozenset({"type", "title", "description"})
_NEVER: set[str] = set()
"""The marker of a policy whose schema may constrain the id's value: nothing is remembered."""
_VALID: dict[str, set[str]] = {}
"""Per policy whose schema constrains `evaluation_id` by its type alone: replies found valid,
as sorted JSON with the evaluation id blanked (`_valid_key`). Each trial's reply differs from
the case's others only in its fresh id, and schema validation was half of `report`'s grading."""
_MAX_VALID = 4096


def id_by_type_only(corpus_format: CorpusPolicy) -> bool:
    """Whether the schema's only word on `evaluation_id`'s value is "a string"."""
    schema = _validator(corpus_format).schema
    prop = schema.get("properties", {}).get("evaluation_id") if isinstance(schema, dict) else None
    return (
        isinstance(schema, dict)
        and set(schema) <= _PLAIN_ROOT
        and isinstance(prop, dict)
        and set(prop) <= _PLAIN_STRING
        and prop.get("type") == "string"
    )


def _valid_key(instance: Any) -> str | None:
    if type(instance) is not dict or type(instance.get("evaluation_id")) is not str:
        return None
    return json.dumps({**instance, "evaluation_id": ""}, sort_keys=True)


def _schema_reason(instance: dict[str, Any], corpus_format: CorpusPolicy) -> str | None:
    """Why `instance` violates the response schema, or None.

    A reply equal to one already found valid but for its evaluation id is valid too when the
    schema says nothing about the id but that it is a string (`id_by_type_only`); only valid
    results are remembered, so every reason is the validator's own for this reply.
    """
    policy_id = corpus_format.policy_id
    if policy_id not in _VALID:
        _VALID[policy_id] = set() if id_by_type_only(corpus_format) else _NEVER
    valid = _VALID[policy_id]
    key = _valid_key(instance) if valid is not _NEVER else None
    if key is not None and key in valid:
        return None
    validator = _validator(corpus_format)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    if not errors:
        if key is not None:
            if len(valid) >= _MAX_VALID:
                valid.clear()
            valid.add(key)
        return None
    codes = frozenset(corpus_format.reason_codes)
    for error in errors:
        path = list(error.absolute_path)
        if (
            len(path) == 2
            and path[0] == "reason_codes"
            and error.validator == "enum"
            and error.instance not in codes
        ):
            return (
                f"reason code {error.instance!r} at {_pointer(path)} is outside the closed "
                f"vocabulary {sorted(codes)}"
            )
    first = errors[0]
    return f"schema violation at {_pointer(list(first.absolute_path))}: {first.message}"


def _invalid(reason: str) -> ValidatedResponse:
    return ValidatedResponse(outcome=Outcome.INVALID, invalid_reason=reason)


def validate_response(
    raw: str | None, candidate_input: BaseModel, extraction: str = "strict"
) -> ValidatedResponse:
    """Validate a raw reviewer reply against the candidate input it answers.

    Checks, in order, each failure giving `invalid` with a precise reason: the reply is one JSON
    object (optionally inside one ```` ```json ```` fence, see `extract_json_object`) without
    duplicate keys; it satisfies the reviewer-response schema (a reason code outside the closed
    vocabulary is named as such); the explanation is not blank; `evaluation_id` equals the input's;
    every `evidence_refs` entry is the `record_id` of a record in this input.

    Args:
        raw: The reply text, or None when the reviewer produced no output.
        candidate_input: The input the reply answers.
        extraction: The declared answer-extraction rule (`_extraction.EXTRACTIONS`).

    Returns:
        `missing` for None/empty/whitespace, `invalid` with a reason, or the decision with the
        parsed response.
    """
    instance, failed = parsed_reply(raw, extraction)
    if failed is not None:
        return failed
    return checked_reply(instance, candidate_input)


def parsed_reply(raw: str | None, extraction: str) -> tuple[Any, ValidatedResponse | None]:
    """The reply's JSON value, or (None, why there is none): `validate_response`'s first steps."""
    if raw is None or not raw.strip():
        return None, ValidatedResponse(outcome=Outcome.MISSING)
    text, why = extract_answer(raw, extraction)
    if text is None:
        return None, _invalid(why or "reply is not a JSON object")
    try:
        return _loads(text), None
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        return None, _invalid(f"reply is not valid JSON: {exc}")


def checked_reply(instance: Any, candidate_input: BaseModel) -> ValidatedResponse:
    """`validate_response`'s steps after parsing: schema, explanation, id, evidence refs."""
    corpus_format = policy_of(candidate_input)
    schema_reason = _schema_reason(instance, corpus_format)
    if schema_reason is not None:
        return _invalid(schema_reason)
    # Every policy's response and candidate-input models have the fields these protocols name.
    response = cast(ReviewFinding, corpus_format.response_model.model_validate(instance))
    seen = cast(CandidateInput, candidate_input)
    if not response.explanation.strip():
        return _invalid("schema violation at /explanation: explanation is blank")
    if response.evaluation_id != seen.evaluation_id:
        return _invalid(
            f"/evaluation_id {response.evaluation_id!r} does not match the input's evaluation id"
        )
    known = {record.record_id for record in seen.evidence}
    for index, ref in enumerate(response.evidence_refs):
        if ref not in known:
            return _invalid(
                f"/evidence_refs/{index} {ref!r} resolves to no record of this input "
                f"(known record ids: {sorted(known)})"
            )
    return ValidatedResponse(outcome=Outcome(response.decision.value), response=response)


def response_schema(candidate_input: BaseModel) -> dict[str, Any]:
    """The JSON Schema of the response model a reply to `candidate_input` must satisfy."""
    return policy_of(candidate_input).response_model.model_json_schema()


def _code_gaps(
    response: Any,
    acceptable: list[str],
    corpus_format: CorpusPolicy,
) -> list[str]:
    """Reason codes must all imply the reached decision and all be among `acceptable`."""
    decision = response.decision.value
    codes = [code.value for code in response.reason_codes]
    contradictory = [c for c in codes if corpus_format.reason_decision[c] != decision]
    gaps = []
    if contradictory:
        gaps.append(f"reason code(s) {contradictory} contradict the decision {decision}")
    outside = [c for c in codes if c not in acceptable]
    if outside and not contradictory:
        gaps.append(f"reason code(s) {outside} are not among the acceptable {acceptable}")
    return gaps


def _citation_gaps(response: Any, case: AuthoredCase, rules: CitationRule) -> list[str]:
    """Citations must cover every decisive record and stay within the policy's stated limits.

    Rule (data, `CorpusPolicy.finding_rules.citations`, stated verbatim in the prompt): every
    decisive record is cited; records of the rule's free kinds may always be cited; of the other
    non-decisive records at most `max_other` may be cited, and (where the rule says so) never all
    of them.
    """
    key = answer_key(case)
    cited = list(dict.fromkeys(response.evidence_refs))
    gaps = []
    uncited = [rid for rid in key.decisive_ids if rid not in cited]
    if uncited:
        gaps.append(f"decisive record(s) not cited: {uncited}")
    free = set(rules.free_kinds)
    others = {rid for rid, kind in key.kinds if kind not in free} - set(key.decisive_ids)
    extra = [rid for rid in cited if rid in others]
    if extra and rules.never_all_others and set(extra) == others:
        gaps.append(f"cites every non-decisive record {sorted(others)}: not a precise citation")
    elif len(extra) > rules.max_other:
        gaps.append(
            f"cites {len(extra)} non-decisive record(s) {extra} of kinds the prompt says not to "
            f"cite unless decisive (at most {rules.max_other} tolerated)"
        )
    return gaps


def support_gaps(validated: ValidatedResponse, case: AuthoredCase) -> list[str]:
    """List every reason a finding is not supported for `case` (empty list = supported).

    Grader-side: reads the case's answer key. A supported finding is valid, reaches the reference
    decision, and
    - uses reason codes that each imply that decision (no contradictory code) and are each among
      the case's acceptable codes;
    - cites every decisive record and otherwise stays within the policy's citation rule (see
      `_citation_gaps`);
    - in a policy with structured discrepancies (`CorpusPolicy.structured_discrepancies`), carries
      discrepancies that cover the case's `decisive_discrepancies` and are all true against the
      visible evidence (`trustbench.rtb.review._findings.discrepancy_gaps`);
    - on a known-contestable case, a decision of one of its listed readings is judged by that
      reading's reason codes (the reference reading's discrepancies are not required of it).

    The explanation is never scored: keyword matching supported a keyword salad and failed correct
    plain wording. It is kept with the trial and shown in the report for people to read.

    Args:
        validated: The result of `validate_response` for this case's exported input.
        case: The authored case, including its expectations.

    Returns:
        Human-readable gaps, in the order the conditions are listed above.
    """
    response = validated.response
    if response is None or not validated.outcome.is_decision:
        return [f"no valid finding (outcome {validated.outcome.value})"]
    key = answer_key(case)  # read once per case, not once per trial
    corpus_format = key.policy
    acceptable = key.acceptable
    decisive = key.decisive
    gaps: list[str] = []
    alternative = next(
        (
            reading
            for reading in key.readings
            if reading.decision == response.decision != key.reference
        ),
        None,
    )
    if alternative is not None:
        # A known-contestable case: the answer key lists this decision as a defensible reading,
        # so its own reason codes are acceptable. The decisive discrepancies are those of the
        # reference reading, so only the truth of what is cited is checked for this one.
        acceptable = [code.value for code in alternative.reason_codes]
        decisive = []
    elif response.decision != key.reference:
        gaps.append(
            f"decision {response.decision.value} differs from the reference {key.reference.value}"
        )
    gaps += _code_gaps(response, acceptable, corpus_format)
    rules = corpus_format.finding_rules
    gaps += _citation_gaps(response, case, rules.citations)
    if corpus_format.structured_discrepancies:
        # Every finding of a format with structured discrepancies is checked, a permit too:
        # nothing cited may be false, and the decisive ones (if any) must be covered. The
        # request side a "proposed value" comes from is the proposal and the stated evaluation
        # time an expiry is judged at (both candidate-visible).
        gaps += discrepancy_gaps(
            getattr(response, "discrepancies", None), decisive, key.evidence, key.request, rules
        )
    return gaps


def is_supported(validated: ValidatedResponse, case: AuthoredCase) -> bool:
    """True when the finding is valid and supported for `case` (see `support_gaps`)."""
    return not support_gaps(validated, case)
