"""Structural checks of a v0.2 corpus (policy `rtb-narrow-approval-v2`), after schema checks.

The v0.1 checks compare each variant with its group's `permitted` case field by field; v0.2 cases
deliberately change several facts at once (that is how surface rules are defeated), so the
per-variant diff check does not apply. What stays: unique ids, decisive records and
discrepancies that resolve inside their case, reason codes that support the decision (in the
answer key and in every contestable reading), a policy record that declares the corpus policy,
and no grader-only value in anything a candidate sees.
"""

from __future__ import annotations

from trustbench.rtb.corpus._problem import Problem, json_pointer
from trustbench.rtb.policy._case_checks import (
    candidate_visible_leaks,
    duplicate_record_ids,
    each_case,
    unresolved_record_ids,
    unsupported_reason_codes,
)
from trustbench.rtb.policy.narrow_v2._models import (
    POLICY_ID_V2,
    REASON_CODE_DECISION_V2,
    CaseV2,
    PolicyRecordV2,
)

CaseFileV2 = tuple[str, CaseV2]
"""A parsed v0.2 case with the relative path of its file."""


def check_cases_v2(cases: list[CaseFileV2]) -> list[Problem]:
    """Run every v0.2 check; an empty list means the cases are consistent."""
    return each_case(cases, _case_internal) + _leaks(cases)


def _case_internal(rel: str, case: CaseV2) -> list[Problem]:
    record_ids = [record.record_id for record in case.evidence]
    problems = duplicate_record_ids(rel, record_ids)
    policies = [r for r in case.evidence if isinstance(r, PolicyRecordV2)]
    if not policies or any(p.policy_id != POLICY_ID_V2 for p in policies):
        problems.append(
            Problem(
                file=rel,
                pointer="/evidence",
                message=f"a v0.2 case needs a policy record declaring {POLICY_ID_V2!r}",
            )
        )
    expectations = case.expectations
    problems += unresolved_record_ids(
        rel, "decisive_record_ids", expectations.decisive_record_ids, record_ids
    )
    problems += unresolved_record_ids(
        rel,
        "decisive_discrepancies",
        [d.record_id for d in expectations.decisive_discrepancies],
        record_ids,
    )
    problems += unsupported_reason_codes(rel, expectations, REASON_CODE_DECISION_V2)
    for index, reading in enumerate(expectations.contestable_readings):
        for code in reading.reason_codes:
            if REASON_CODE_DECISION_V2[code] is not reading.decision:
                problems.append(
                    Problem(
                        file=rel,
                        pointer=json_pointer(["expectations", "contestable_readings", index]),
                        message=f"reading's reason code {code.value!r} does not support its "
                        f"decision {reading.decision.value}",
                    )
                )
    return problems


def _leaks(cases: list[CaseFileV2]) -> list[Problem]:
    """No grader-only value of any case in what a candidate sees of any case (as_of included)."""
    return candidate_visible_leaks(cases, {"task", "as_of", "proposal", "evidence"})
