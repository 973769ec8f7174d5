"""Structural checks of a v0.3 corpus (policy `rtb-narrow-approval-v3`), after schema checks.

As for v0.2 (unique ids, decisive records and discrepancies that resolve inside their case,
reason codes that support the decision, a policy record declaring the corpus policy, no
grader-only value in what a candidate sees; v0.2's leak scan is reused), plus: every rule named
in `decisive_rules` is a rule of the policy text, and each policy record states that text.
"""

from __future__ import annotations

from trustbench.rtb.corpus._problem import Problem, json_pointer
from trustbench.rtb.policy._case_checks import each_case
from trustbench.rtb.policy.narrow_v2._checks import _leaks
from trustbench.rtb.policy.narrow_v3._models import (
    POLICY_ID_V3,
    REASON_CODE_DECISION_V3,
    CaseV3,
    PolicyRecordV3,
)
from trustbench.rtb.policy.narrow_v3._rules import RULE_IDS, policy_text_v3


def check_cases_v3(cases: list[tuple[str, CaseV3]]) -> list[Problem]:
    """Run every v0.3 check; an empty list means the cases are consistent."""
    problems = each_case(
        cases,
        lambda rel, case: [
            Problem(file=rel, pointer=p, message=m) for p, m in _case_internal(case)
        ],
    )
    return problems + _leaks(cases)  # type: ignore[arg-type]


def _case_internal(case: CaseV3) -> list[tuple[str, str]]:
    found = _record_problems(case)
    key = case.expectations
    codes = [
        (
            ["acceptable_reason_codes", i],
            f"reason code {c.value!r} does not support the reference "
            f"decision {key.reference_decision.value}",
        )
        for i, c in enumerate(key.acceptable_reason_codes)
        if REASON_CODE_DECISION_V3[c] is not key.reference_decision
    ]
    rules = [
        (["decisive_rules", i], f"decisive rule {r!r} is not a rule of the policy text")
        for i, r in enumerate(key.decisive_rules)
        if r not in RULE_IDS
    ]
    readings = [
        (["contestable_readings", i], "a reading's reason code does not support its decision")
        for i, reading in enumerate(key.contestable_readings)
        if any(REASON_CODE_DECISION_V3[c] is not reading.decision for c in reading.reason_codes)
    ]
    for parts, message in [*codes, *rules, *readings]:
        found.append((json_pointer(["expectations", *parts]), message))
    return found


def _record_problems(case: CaseV3) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    record_ids = [record.record_id for record in case.evidence]
    found += [
        (json_pointer(["evidence", i, "record_id"]), f"duplicate record id {r!r} within the case")
        for i, r in enumerate(record_ids)
        if record_ids.index(r) != i
    ]
    policies = [r for r in case.evidence if isinstance(r, PolicyRecordV3)]
    if not policies or any(p.policy_id != POLICY_ID_V3 for p in policies):
        found.append(("/evidence", f"a v0.3 case needs a policy record declaring {POLICY_ID_V3!r}"))
    if any(p.text != policy_text_v3() for p in policies):
        found.append(("/evidence", "a policy record's text is not the v0.3 policy text"))
    key = case.expectations
    refs = [("decisive_record_ids", i, r) for i, r in enumerate(key.decisive_record_ids)]
    refs += [
        ("decisive_discrepancies", i, d.record_id) for i, d in enumerate(key.decisive_discrepancies)
    ]
    found += [
        (
            json_pointer(["expectations", where, i]),
            f"record id {r!r} resolves to no evidence record",
        )
        for where, i, r in refs
        if r not in record_ids
    ]
    return found
