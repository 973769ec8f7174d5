"""Structural checks across the cases of a corpus (after each file parsed and matched the schema).

Each check returns `Problem`s naming the case file and the JSON pointer at fault. The checks are
about the *authored* corpus being internally consistent; they never stand in for a reviewer and
never decide what a candidate should have answered.

Checks for every corpus: unique case ids, unique record ids within a case, every decisive record id
resolves to a record of its case, acceptable reason codes support the reference decision, a case
named with a starter variant carries that variant's reference decision, a group's cases share one
underlying approval, and a group's variants each change exactly the fact their name says relative
to the group's `permitted` case (only where the group has one), and no candidate-visible field
(task, proposal, evidence) mentions a grader-only value of any case.

Checks for the built-in starter only: the 10 x 6 grid of groups and variants, the 20/20/20 split of
reference decisions, and that every policy record states the same policy as the review prompt.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from trustbench.rtb.corpus._models import (
    REASON_CODE_DECISION,
    VARIANT_REFERENCE,
    ApprovalRecord,
    Case,
    Decision,
    DomainGroup,
    PolicyRecord,
    ResourceStateRecord,
    ServiceNoticeRecord,
    Variant,
)
from trustbench.rtb.corpus._problem import Problem, json_pointer
from trustbench.rtb.policy._case_checks import (
    candidate_visible_leaks,
    duplicate_record_ids,
    each_case,
    unresolved_record_ids,
    unsupported_reason_codes,
)

_VARIANT_NAMES = frozenset(variant.value for variant in Variant)

CaseFile = tuple[str, Case]
"""A parsed case with the relative path of the file it came from."""


def check_cases(cases: list[CaseFile]) -> list[Problem]:
    """Run every check that applies to any corpus."""
    problems = each_case(cases, _case_internal)
    problems += _shared_approval(cases)
    problems += _variant_facts(cases)
    problems += _candidate_visible_leaks(cases)
    return problems


def check_starter(
    cases: list[CaseFile], review_prompt: str | None, *, complete: bool = True
) -> list[Problem]:
    """Checks that hold only for the built-in v0.1 starter: grid, split and shared policy.

    Args:
        cases: The parsed cases.
        review_prompt: The corpus's prompt text (None when unreadable).
        complete: False when some case file failed to parse; the grid and split are then not
            checked, since they would only repeat that failure.
    """
    problems: list[Problem] = []
    if not complete:
        return _shared_policy(cases, review_prompt)
    cells = Counter((case.group, case.variant) for _, case in cases)
    for group in DomainGroup:
        for variant in Variant:
            found = cells.get((group.value, variant.value), 0)
            if found != 1:
                problems.append(
                    Problem(
                        file="cases/",
                        message=f"starter grid: {found} cases for group {group.value!r} x "
                        f"variant {variant.value!r}, expected exactly 1",
                    )
                )
    known = {(g.value, v.value) for g in DomainGroup for v in Variant}
    for rel, case in cases:
        if (case.group, case.variant) not in known:
            problems.append(
                Problem(
                    file=rel,
                    pointer="/group",
                    message=f"group {case.group!r} / variant {case.variant!r} is outside the "
                    "starter's 10 x 6 grid",
                )
            )
    split = Counter(case.expectations.reference_decision for _, case in cases)
    if any(split.get(decision, 0) != 20 for decision in Decision):
        shown = ", ".join(f"{d.value} {split.get(d, 0)}" for d in Decision)
        problems.append(
            Problem(file="cases/", message=f"starter split is {shown}; expected 20/20/20")
        )
    return problems + _shared_policy(cases, review_prompt)


def _shared_policy(cases: list[CaseFile], review_prompt: str | None) -> list[Problem]:
    problems = []
    for rel, case in cases:
        for index, record in enumerate(case.evidence):
            if isinstance(record, PolicyRecord) and (
                review_prompt is None or record.text not in review_prompt
            ):
                problems.append(
                    Problem(
                        file=rel,
                        pointer=json_pointer(["evidence", index, "text"]),
                        message="policy text is not stated verbatim in prompts/review_prompt.md",
                    )
                )
    return problems


def _case_internal(rel: str, case: Case) -> list[Problem]:
    record_ids = [record.record_id for record in case.evidence]
    problems = duplicate_record_ids(rel, record_ids)
    expectations = case.expectations
    problems += unresolved_record_ids(
        rel,
        "decisive_record_ids",
        expectations.decisive_record_ids,
        record_ids,
        f" of this case (records: {', '.join(record_ids)})",
    )
    problems += unsupported_reason_codes(rel, expectations, REASON_CODE_DECISION)
    if case.variant in _VARIANT_NAMES:
        expected = VARIANT_REFERENCE[Variant(case.variant)]
        if expectations.reference_decision is not expected:
            problems.append(
                Problem(
                    file=rel,
                    pointer="/expectations/reference_decision",
                    message=f"variant {case.variant!r} implies {expected.value}, but the "
                    f"reference decision is {expectations.reference_decision.value}",
                )
            )
    return problems


def _shared_approval(cases: list[CaseFile]) -> list[Problem]:
    """A group's variants must share one underlying approval (same `approval_id`)."""
    first: dict[str, tuple[str, str]] = {}
    problems = []
    for rel, case in cases:
        for index, record in enumerate(case.evidence):
            if not isinstance(record, ApprovalRecord):
                continue
            seen = first.setdefault(case.group, (record.approval_id, rel))
            if record.approval_id != seen[0]:
                problems.append(
                    Problem(
                        file=rel,
                        pointer=json_pointer(["evidence", index, "approval_id"]),
                        message=f"approval {record.approval_id!r} differs from {seen[0]!r} in "
                        f"{seen[1]}: a group's variants must share the same underlying approval",
                    )
                )
    return problems


def _facts(case: Case) -> dict[str, Any]:
    """The decision-relevant facts of a case, with presentation (order, wording) removed."""
    facts: dict[str, Any] = {
        "proposal.operation": case.proposal.operation,
        "proposal.target": case.proposal.target,
        "proposal.parameters": case.proposal.parameters,
        "proposal.resource_revision": case.proposal.resource_revision,
    }
    approvals = [r for r in case.evidence if isinstance(r, ApprovalRecord)]
    notices = [r for r in case.evidence if isinstance(r, ServiceNoticeRecord)]
    states = [r for r in case.evidence if isinstance(r, ResourceStateRecord)]
    policies = sorted(r.text for r in case.evidence if isinstance(r, PolicyRecord))
    facts["approval"] = [
        (a.approval_id, a.operation, a.target, a.approved_parameters, a.approved_revision)
        for a in approvals
    ]
    facts["approval.status"] = [a.status for a in approvals]
    facts["service_notice"] = [(n.service, n.status) for n in notices]
    facts["resource.revision"] = [s.revision for s in states]
    facts["resource.identity"] = [(s.resource_id, s.resource_type, s.attributes) for s in states]
    facts["policy"] = policies
    return facts


_EXPECTED_DIFF: dict[Variant, set[str]] = {
    Variant.PRESENTATION_ONLY: set(),
    Variant.UNAUTHORIZED_PARAMETERS: {"proposal.parameters"},
    Variant.REVOKED_APPROVAL: {"approval.status"},
    Variant.UNAVAILABLE_APPROVAL_EVIDENCE: {"approval", "approval.status", "service_notice"},
    Variant.CHANGED_RESOURCE_REVISION: {"resource.revision", "proposal.resource_revision"},
}
"""Which facts each variant changes relative to the group's permitted case (and nothing else)."""


def _variant_facts(cases: list[CaseFile]) -> list[Problem]:
    base = {case.group: case for _, case in cases if case.variant == Variant.PERMITTED.value}
    problems = []
    for rel, case in cases:
        permitted = base.get(case.group)
        if permitted is None or case.variant not in _EXPECTED_DIFF:
            continue
        ours, theirs = _facts(case), _facts(permitted)
        changed = {key for key in ours if ours[key] != theirs[key]}
        expected = _EXPECTED_DIFF[Variant(case.variant)]
        if changed != expected:
            problems.append(
                Problem(
                    file=rel,
                    message=f"variant {case.variant!r} must change exactly "
                    f"{sorted(expected) or 'no facts'} relative to {permitted.case_id!r}, "
                    f"but changes {sorted(changed) or 'no facts'}",
                )
            )
        elif case.variant == Variant.PRESENTATION_ONLY.value and _presentation(case) == (
            _presentation(permitted)
        ):
            problems.append(
                Problem(
                    file=rel,
                    message=f"presentation-only variant is identical to {permitted.case_id!r}; "
                    "it must vary presentation",
                )
            )
    return problems


def _presentation(case: Case) -> str:
    dumped = case.model_dump(mode="json", include={"task", "proposal", "evidence"})
    return json.dumps(dumped)


def _candidate_visible_leaks(cases: list[CaseFile]) -> list[Problem]:
    """No grader-only value of any case in the task, proposal or evidence of any case."""
    return candidate_visible_leaks(cases, {"task", "proposal", "evidence"})
