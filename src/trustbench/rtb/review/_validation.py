"""Turn a reviewer's raw reply into an outcome, and judge whether a valid finding is supported.

Two steps, two sides of the information boundary:

- `validate_response` sees only what the reviewer saw (the `CandidateInput`) and decides the
  *outcome*: `permit`, `deny`, `hold`, `missing` or `invalid`. Only a valid response whose
  decision is `permit` is approval; a missing or malformed reply never is.
- `is_supported` is grader-side: it takes the authored `Case` (with its answer key) and decides
  whether a valid finding reaches the reference decision *for the decisive reasons*: consistent
  reason codes, precise citations and (in a policy whose responses carry them) structured
  discrepancies. The explanation
  text is kept for people to read and never keyword-scored.

Schema checking uses `jsonschema` (Draft 2020-12) against the response model of the corpus's
policy (`CorpusPolicy.response_model`, from `trustbench.rtb.policy`), found by the type of the
candidate input the reply answers (`policy_of`), so the reported reason carries a JSON pointer;
the pydantic model is then built from the same object (it cannot fail once the schema passed, but
it gives the typed value).

`report` grades through `_reply_grader.ReplyGrader`: the same results as `validate_response`
then `support_gaps`, with each distinct reply of a case (but for its fresh evaluation id) graded
once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, Field, SerializeAsAny

from trustbench._docstrings import documented
from trustbench.rtb.corpus._models import Discrepancy
from trustbench.rtb.corpus._normalise import equivalent
from trustbench.rtb.policy._protocol import (
    PARAMETER,
    AuthoredCase,
    CandidateInput,
    CitationRule,
    CorpusPolicy,
    FieldRule,
    FindingRules,
    ReviewFinding,
)
from trustbench.rtb.policy._registry import policy_of
from trustbench.rtb.review._extraction import extract_answer
from trustbench.rtb.review._rows import Outcome
from trustbench.rtb.review._schema_check import PlainSchema

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator


# ------------------------------------------------------------------------------------------------
# What grading reads of one case's answer key, gathered once per case instead of once per trial.
#
# `support_gaps` runs for every graded trial: a million-trial report judges each case's finding
# ten thousand times. Reading the answer key off the pydantic case each time (the acceptable
# codes, the absent optional fields, the evidence dumped to JSON for the discrepancy checks) cost
# more than the checks themselves. Cases are frozen models, so what is read once holds for every
# trial; the view is kept per case object (by identity, with the case held so the id stays its).


@dataclass(frozen=True, slots=True)
class AnswerKey:
    """One case's answer key as `support_gaps` reads it."""

    policy: CorpusPolicy
    reference: Any
    """The reference decision."""
    acceptable: list[str]
    """The acceptable reason codes' values."""
    decisive: list[Any]
    """The decisive discrepancies (empty when the policy has none)."""
    readings: list[Any]
    """The known-contestable readings (empty when the case has none)."""
    decisive_ids: list[str]
    """The decisive record ids, in authored order."""
    kinds: tuple[tuple[str, Any], ...]
    """Each evidence record's id and kind (None without one), in authored order. The citation
    rule's free kinds are applied at grading time: the rule is the policy's, read when used."""
    evidence: list[dict[str, Any]]
    """The candidate-visible evidence records as JSON (for the discrepancy checks)."""
    request: dict[str, Any]
    """The candidate-visible request side: the proposal and the stated evaluation time."""


_KEYS: dict[int, tuple[AuthoredCase, AnswerKey]] = {}
_MAX_KEYS = 4096


def answer_key(case: AuthoredCase) -> AnswerKey:
    """`case`'s answer key view, made on first use."""
    found = _KEYS.get(id(case))
    if found is not None and found[0] is case:
        return found[1]
    key = _made(case)
    if len(_KEYS) >= _MAX_KEYS:
        _KEYS.clear()
    _KEYS[id(case)] = (case, key)
    return key


def _made(case: AuthoredCase) -> AnswerKey:
    policy = policy_of(case)
    expected = case.expectations
    structured = policy.structured_discrepancies
    return AnswerKey(
        policy=policy,
        reference=expected.reference_decision,
        acceptable=[code.value for code in expected.acceptable_reason_codes],
        decisive=list(getattr(expected, "decisive_discrepancies", None) or []),
        readings=list(getattr(expected, "contestable_readings", None) or []),
        decisive_ids=list(expected.decisive_record_ids),
        kinds=tuple((r.record_id, getattr(r, "kind", None)) for r in case.evidence),
        evidence=[record.model_dump(mode="json") for record in case.evidence] if structured else [],
        request=(
            {
                "proposal": case.proposal.model_dump(mode="json"),
                "as_of": getattr(case, "as_of", None),
            }
            if structured
            else {}
        ),
    )


# ------------------------------------------------------------------------------------------------
# Grade a finding's structured discrepancies against the records (grader side).
#
# A reviewer that lists every field it can see, or invents a value, must not be "supported", and a
# reviewer that writes `"22"` where the evidence says `22` must not be penalised for an encoding the
# policy declares equivalent. Every rule applied here is an entry of the policy's `FindingRules`
# (`trustbench.rtb.policy._protocol`), which the candidate prompt states verbatim:
#
# - *coverage*: every decisive discrepancy of the case (grader-only) is matched by a cited one with
#   the same record id and JSON pointer and equivalent proposed and evidence values;
# - *truth*: every cited discrepancy is true of the records. Its record exists; its field is one the
#   policy compares for that kind of record (a `FieldRule`); the field exists in the record (or is
#   absent where the rule says absence is cited as null, under an object that exists); the cited
#   evidence value equals the record's and the cited proposed value equals the request's value at
#   the place the rule names (null where the rule says so); and the rule's condition holds (the two
#   differ after normalisation, the approval expired at `as_of`, ...), together with every other
#   fact the discrepancy asserts of its record (`FieldRule.jointly`, `FieldRule.record_values`):
#   a freeze "in effect" covers the proposal's environment and has started, a service notice is
#   about the service the proposal depends on, a self-approval is on the approval the proposal is
#   judged against. Times compare as instants in any offset, values after the policy's
#   normalisation (`equivalent`). One false or mis-valued
#   discrepancy makes the finding unsupported, however many true ones stand beside it;
# - at most `FindingRules.max_extra_discrepancies` true but non-decisive discrepancies.

_UNRESOLVED = object()


def resolve_pointer(document: Any, pointer: str) -> Any:
    """The value at an RFC 6901 JSON pointer, or a private sentinel when it does not resolve."""
    if pointer == "":
        return document
    value = document
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return _UNRESOLVED
    return value


def _same(cited: Discrepancy, decisive: Discrepancy) -> bool:
    return (
        cited.record_id == decisive.record_id
        and cited.field == decisive.field
        and equivalent(cited.proposed_value, decisive.proposed_value)
        and equivalent(cited.evidence_value, decisive.evidence_value)
    )


def _instant(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None


def _match(rule: FieldRule, pointer: str, proposal_parameters: dict[str, Any]) -> str | None:
    """The proposed-side pointer when `pointer` is this rule's field, else None ('' = none)."""
    if PARAMETER not in rule.field:
        return (rule.proposed or "") if pointer == rule.field else None
    prefix = rule.field.split(PARAMETER)[0]
    name = pointer[len(prefix) :] if pointer.startswith(prefix) else ""
    if not name or "/" in name or name not in proposal_parameters:
        return None  # only a parameter the proposal sets is compared
    return (rule.proposed or "").replace(PARAMETER, name)


def _authorised(records: dict[str, dict[str, Any]]) -> list[Any]:
    return [
        approver
        for record in records.values()
        if record.get("kind") == "policy"
        for approver in record.get("authorised_approvers") or []
    ]


def _condition_holds(
    rule: FieldRule, proposed: Any, actual: Any, request: dict[str, Any], records: dict[str, Any]
) -> bool:
    """Whether the rule's condition makes these values a discrepancy."""
    if rule.holds == "differs":
        return not equivalent(proposed, actual)
    if rule.holds == "same":
        return equivalent(proposed, actual)
    if rule.holds == "not_value":
        return not equivalent(actual, rule.conforming)
    if rule.holds == "not_authorised":
        return not any(equivalent(actual, a) for a in _authorised(records))
    reference = _instant(proposed if rule.proposed is not None else request.get("as_of"))
    recorded = _instant(actual)
    if reference is None or recorded is None:
        return False
    return recorded <= reference if rule.holds == "at_or_before" else recorded > reference


def _approval_of_the_proposal(approval: dict[str, Any], request: dict[str, Any]) -> bool:
    """The approval is of the proposal's operation and target (whenever it was issued)."""
    proposal = request.get("proposal") or {}
    return equivalent(approval.get("operation"), proposal.get("operation")) and equivalent(
        approval.get("target"), proposal.get("target")
    )


def _approval_applies(approval: dict[str, Any], request: dict[str, Any]) -> bool:
    """The approval is of the proposal's operation and target and issued at or before `as_of`."""
    issued, as_of = _instant(approval.get("issued_at")), _instant(request.get("as_of"))
    return (
        _approval_of_the_proposal(approval, request)
        and issued is not None
        and as_of is not None
        and issued <= as_of
    )


def _approval_governs(
    approval: dict[str, Any], request: dict[str, Any], records: dict[str, dict[str, Any]]
) -> bool:
    """The approval applies and none that applies was issued later (the latest governs)."""
    if not _approval_applies(approval, request):
        return False
    issued = _instant(approval.get("issued_at"))
    return not any(
        record.get("kind") == "approval"
        and _approval_applies(record, request)
        and (later := _instant(record.get("issued_at"))) is not None
        and issued is not None
        and later > issued
        for record in records.values()
    )


def _revokes_the_governing_approval(
    revocation: dict[str, Any], request: dict[str, Any], records: dict[str, dict[str, Any]]
) -> bool:
    return any(
        record.get("kind") == "approval"
        and equivalent(record.get("approval_id"), revocation.get("revokes"))
        and _approval_governs(record, request, records)
        for record in records.values()
    )


def _freeze_started_over_the_environment(freeze: dict[str, Any], request: dict[str, Any]) -> bool:
    environment = (request.get("proposal") or {}).get("environment")
    starts, as_of = _instant(freeze.get("starts_at")), _instant(request.get("as_of"))
    return (
        any(equivalent(environment, covered) for covered in freeze.get("environments") or [])
        and starts is not None
        and as_of is not None
        and starts <= as_of
    )


_JOINT_FACTS: dict[str, str] = {
    "approval_of_the_proposal": "the approval is not of the proposal's operation and target",
    "approval_governs": "the approval is not the one the proposal is judged against (it is not "
    "of the proposal's operation and target, was issued after as_of, or a later applicable "
    "approval supersedes it)",
    "revokes_the_governing_approval": "the revocation names no approval the proposal is judged "
    "against (the latest of the proposal's operation and target issued by as_of)",
    "state_of_the_target": "the resource state is not of the proposal's target",
    "freeze_started_over_the_environment": "the freeze does not cover the proposal's "
    "environment or has not started at as_of",
}
"""What is false when a `Jointly` fact fails, as the gap says it."""


def _joint_fact_holds(
    fact: str,
    record: dict[str, Any],
    request: dict[str, Any],
    records: dict[str, dict[str, Any]],
) -> bool:
    """Whether one `Jointly` fact holds of the cited record."""
    if fact == "approval_of_the_proposal":
        return _approval_of_the_proposal(record, request)
    if fact == "approval_governs":
        return _approval_governs(record, request, records)
    if fact == "revokes_the_governing_approval":
        return _revokes_the_governing_approval(record, request, records)
    if fact == "state_of_the_target":
        target = (request.get("proposal") or {}).get("target")
        return equivalent(record.get("resource_id"), target)
    if fact == "freeze_started_over_the_environment":
        return _freeze_started_over_the_environment(record, request)
    raise ValueError(f"unknown joint fact {fact!r} in a policy's finding rules")


def _jointly_false(
    rule: FieldRule,
    record: dict[str, Any],
    request: dict[str, Any],
    records: dict[str, dict[str, Any]],
) -> str | None:
    """What the discrepancy asserts of its record beyond its one field that is false, or None."""
    for pointer, value in rule.record_values:
        recorded = resolve_pointer(record, pointer)
        if recorded is _UNRESOLVED or not equivalent(recorded, value):
            shown = None if recorded is _UNRESOLVED else recorded
            return f"its {pointer} is {shown!r}, not {value!r}"
    for fact in rule.jointly:
        if not _joint_fact_holds(fact, record, request, records):
            return _JOINT_FACTS[fact]
    return None


def _falsehood(
    cited: Discrepancy,
    records: dict[str, dict[str, Any]],
    request: dict[str, Any],
    rules: FindingRules,
) -> str | None:
    """Why `cited` is false against the records, or None when it is true."""
    where = f"{cited.record_id}{cited.field}"
    record = records.get(cited.record_id)
    if record is None:
        return f"discrepancy cites record {cited.record_id!r}, which is not in the evidence"
    parameters = (request.get("proposal") or {}).get("parameters") or {}
    kind = str(record.get("kind"))
    matched = [
        (rule, side)
        for rule in rules.rules_for(kind)
        if (side := _match(rule, cited.field, parameters)) is not None
    ]
    if not matched:
        return f"discrepancy field {where} is not one the policy compares for a {kind} record"
    rule, side = matched[0]
    actual = resolve_pointer(record, cited.field)
    if actual is _UNRESOLVED:
        parent = resolve_pointer(record, cited.field.rpartition("/")[0])
        if not (rule.absent_is_null and isinstance(parent, dict) and cited.evidence_value is None):
            return f"discrepancy field {where} does not exist in that record"
        actual = None
    if not equivalent(actual, cited.evidence_value):
        return (
            f"discrepancy evidence value {cited.evidence_value!r} at {where} is false "
            f"(the record says {actual!r})"
        )
    expected = resolve_pointer(request, side) if side else None
    if expected is _UNRESOLVED or not equivalent(cited.proposed_value, expected):
        return (
            f"discrepancy proposed value {cited.proposed_value!r} at {where} is not what the rule "
            f"for that field says ({side or 'null'} of the request: {expected!r})"
        )
    if not _condition_holds(rule, cited.proposed_value, actual, request, records):
        return (
            f"discrepancy at {where} is no discrepancy: {cited.proposed_value!r} vs {actual!r} "
            f"(the rule needs {rule.holds})"
        )
    jointly = _jointly_false(rule, record, request, records)
    if jointly is not None:
        return f"discrepancy at {where} does not hold as a whole: {jointly}"
    return None


def discrepancy_gaps(
    cited: Sequence[Discrepancy] | None,
    decisive: Sequence[Discrepancy],
    evidence: Sequence[dict[str, Any]],
    request: dict[str, Any],
    rules: FindingRules,
) -> list[str]:
    """Every reason the cited discrepancies do not support the finding (empty = they do).

    Args:
        cited: The reviewer's discrepancies; None when its response format carries none.
        decisive: The case's decisive discrepancies (grader-only answer key).
        evidence: The candidate-visible evidence records as JSON objects.
        request: The candidate-visible request: `{"proposal": ..., "as_of": ...}`.
        rules: The policy's finding rules.

    Returns:
        Human-readable gaps: uncovered decisive discrepancies, false ones, too many extras.
    """
    if cited is None:
        return ["the response carries no structured discrepancies"]
    records = {str(r.get("record_id")): r for r in evidence}
    gaps = [
        f"decisive discrepancy not cited: {d.record_id}{d.field} "
        f"(proposed {d.proposed_value!r}, evidence {d.evidence_value!r})"
        for d in decisive
        if not any(_same(c, d) for c in cited)
    ]
    gaps += [
        reason for c in cited if (reason := _falsehood(c, records, request, rules)) is not None
    ]
    extras = [c for c in cited if not any(_same(c, d) for d in decisive)]
    if len(extras) > rules.max_extra_discrepancies:
        gaps.append(
            f"{len(extras)} non-decisive discrepancies cited (at most "
            f"{rules.max_extra_discrepancies} are tolerated, as the prompt states)"
        )
    return gaps


_SCHEMAS: dict[str, PlainSchema] = {}
"""Response schema per policy id, made on first use."""
_VALIDATORS: dict[str, Draft202012Validator] = {}
"""`jsonschema` validator per policy id, built (and `jsonschema` imported) on first use: only for
a reply the plain check did not find valid (`_schema_reason`)."""


def _schema(corpus_format: CorpusPolicy) -> PlainSchema:
    if corpus_format.policy_id not in _SCHEMAS:
        schema = corpus_format.response_model.model_json_schema()
        _SCHEMAS[corpus_format.policy_id] = PlainSchema(schema)
    return _SCHEMAS[corpus_format.policy_id]


def _validator(corpus_format: CorpusPolicy) -> Draft202012Validator:
    if corpus_format.policy_id not in _VALIDATORS:
        from jsonschema import Draft202012Validator

        _VALIDATORS[corpus_format.policy_id] = Draft202012Validator(_schema(corpus_format).schema)
    return _VALIDATORS[corpus_format.policy_id]


if TYPE_CHECKING:
    Finding = ReviewFinding | None
else:
    # An instance of the policy's own response model, serialized as the model it is;
    # `ReviewFinding` says what the harness may read of any of them.
    Finding = SerializeAsAny[BaseModel] | None


class ValidatedResponse(BaseModel):
    """The outcome of validating one raw reply against the input it answers."""

    model_config = documented(frozen=True)

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
    schema = _schema(corpus_format).schema
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

    A reply the plain check finds valid is (`_schema_check.py`: it says so only where
    `jsonschema` would); any other is checked by `jsonschema`, which decides and words the
    reason. A reply equal to one already found valid but for its evaluation id is valid too when
    the schema says nothing about the id but that it is a string (`id_by_type_only`); only valid
    results are remembered, so every reason is the validator's own for this reply.
    """
    policy_id = corpus_format.policy_id
    if policy_id not in _VALID:
        _VALID[policy_id] = set() if id_by_type_only(corpus_format) else _NEVER
    valid = _VALID[policy_id]
    key = _valid_key(instance) if valid is not _NEVER else None
    if key is not None and key in valid:
        return None
    found_valid = _schema(corpus_format).valid(instance) is True
    reason = None if found_valid else _validator_reason(instance, corpus_format)
    if reason is None and key is not None:
        if len(valid) >= _MAX_VALID:
            valid.clear()
        valid.add(key)
    return reason


def _validator_reason(instance: dict[str, Any], corpus_format: CorpusPolicy) -> str | None:
    """`jsonschema`'s verdict on `instance`: None when valid, else the first reason."""
    validator = _validator(corpus_format)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    if not errors:
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
    raw: str | None,
    candidate_input: BaseModel,
    extraction: str = "strict",
    *,
    reasoning_delimiter: str | None = None,
    finish_reason: str | None = None,
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
        reasoning_delimiter: The candidate's declared end of reasoning (`final_json_object`).
        finish_reason: Why the provider says generation stopped; a reply cut by the token
            limit is `invalid` whatever it holds (`cut_reply`).

    Returns:
        `missing` for None/empty/whitespace, `invalid` with a reason, or the decision with the
        parsed response.
    """
    instance, failed = parsed_reply(raw, extraction, reasoning_delimiter, finish_reason)
    if failed is not None:
        return failed
    return checked_reply(instance, candidate_input)


CUT_FINISH_REASONS = frozenset({"length", "max_tokens"})
"""Finish reasons that mean the token limit cut the reply (OpenAI-compatible `length`,
Anthropic `max_tokens`)."""


def cut_reply(finish_reason: str | None) -> ValidatedResponse | None:
    """`invalid` ("cut by max_tokens") for a reply the token limit cut; None otherwise.

    A cut reply is never a decision, even when a complete object parses out of it: the model
    was stopped before it finished saying what it meant (a reasoning model stopped mid-draft
    may have written a complete draft object it would have corrected).
    """
    if finish_reason not in CUT_FINISH_REASONS:
        return None
    return _invalid(f"cut by max_tokens (finish_reason {finish_reason})")


def parsed_reply(
    raw: str | None,
    extraction: str,
    reasoning_delimiter: str | None = None,
    finish_reason: str | None = None,
) -> tuple[Any, ValidatedResponse | None]:
    """The reply's JSON value, or (None, why there is none): `validate_response`'s first steps.

    A cut reply is `invalid` (`cut_reply`) before anything else is asked, an empty one too (a
    reasoning model may spend the whole limit in `reasoning_content`: it answered nothing
    because it was stopped, which the reason says, not because it had nothing to say).
    """
    cut = cut_reply(finish_reason)
    if cut is not None:
        return None, cut
    if raw is None or not raw.strip():
        return None, ValidatedResponse(outcome=Outcome.MISSING)
    text, why = extract_answer(raw, extraction, reasoning_delimiter)
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
      visible evidence (`trustbench.rtb.review._validation.discrepancy_gaps`);
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


# ------------------------------------------------------------------------------------------------
# Why replies were invalid: the top reasons per candidate, with counts and one example each.
#
# A real model that writes a polite line before its JSON can make a candidate "not evaluable"
# while the CLI said nothing about why. Reasons name values (a record id, a JSON error's
# column), so they are grouped by their shape: quoted values and numbers are replaced by
# placeholders, and the first full reason of each group is kept as its example. The record
# holds every group (`review.invalid_reasons`); the report and `trustbench report` show the
# top `TOP_REASONS` per candidate.

TOP_REASONS = 3
"""Groups shown per candidate in the report and on the console."""
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"\d+")
_EXAMPLE_CHARS = 200


def reason_shape(reason: str) -> str:
    """A reason with its values blanked, so equal failures group together."""
    return _NUMBER.sub("N", _QUOTED.sub("'…'", reason))


def invalid_reasons(trials: Iterable[Any]) -> dict[str, list[dict[str, Any]]]:
    """Candidate -> reason groups (most frequent first): shape, count, example, reply excerpt.

    Args:
        trials: Graded member trials (`_grading.MemberTrial`): `candidate`, `validated`,
            `raw_reply`.
    """
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    for trial in trials:
        reason = trial.validated.invalid_reason
        if trial.validated.outcome.value != "invalid" or not reason:
            continue
        shape = reason_shape(reason)
        group = groups.setdefault(trial.candidate, {}).setdefault(
            shape,
            {"reason": shape, "count": 0, "example": reason,
             "reply_excerpt": (trial.raw_reply or "")[:_EXAMPLE_CHARS]},
        )  # fmt: skip
        group["count"] += 1
    return {
        name: sorted(by_shape.values(), key=lambda g: (-g["count"], g["reason"]))
        for name, by_shape in sorted(groups.items())
    }


def reason_lines(groups: dict[str, list[dict[str, Any]]], top: int = TOP_REASONS) -> list[str]:
    """One line per shown group: `candidate: N invalid: reason (e.g. example)`."""
    lines = []
    for name, found in groups.items():
        total = sum(g["count"] for g in found)
        for group in found[:top]:
            lines.append(
                f"{name}: {group['count']} of {total} invalid replies: {group['reason']} "
                f"(e.g. {group['example']!r})"
            )
        if len(found) > top:
            rest = sum(g["count"] for g in found[top:])
            lines.append(f"{name}: {rest} more in {len(found) - top} other reason group(s)")
    return lines
