"""Grade a finding's structured discrepancies against the records (grader side).

A reviewer that lists every field it can see, or invents a value, must not be "supported", and a
reviewer that writes `"22"` where the evidence says `22` must not be penalised for an encoding the
policy declares equivalent. Every rule applied here is an entry of the policy's `FindingRules`
(`trustbench.rtb.policy._finding_rules`), which the candidate prompt states verbatim:

- *coverage*: every decisive discrepancy of the case (grader-only) is matched by a cited one with
  the same record id and JSON pointer and equivalent proposed and evidence values;
- *truth*: every cited discrepancy is true of the records. Its record exists; its field is one the
  policy compares for that kind of record (a `FieldRule`); the field exists in the record (or is
  absent where the rule says absence is cited as null, under an object that exists); the cited
  evidence value equals the record's and the cited proposed value equals the request's value at
  the place the rule names (null where the rule says so); and the rule's condition holds (the two
  differ after normalisation, the approval expired at `as_of`, ...). One false or mis-valued
  discrepancy makes the finding unsupported, however many true ones stand beside it;
- at most `FindingRules.max_extra_discrepancies` true but non-decisive discrepancies.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from trustbench.rtb.corpus._discrepancy import Discrepancy
from trustbench.rtb.corpus._normalise import equivalent
from trustbench.rtb.policy._finding_rules import PARAMETER, FieldRule, FindingRules

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
