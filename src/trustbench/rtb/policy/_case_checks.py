"""Structural case checks whose logic is the same under every policy that uses them.

A policy's `_checks.py` composes these with its own (each version's vocabulary and records
differ; what a duplicate record id, an unsupported reason code or a leak is does not). Each check
returns `Problem`s naming the case file and the JSON pointer at fault.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from trustbench.rtb.corpus._leakscan import find_leaks, grader_only_values
from trustbench.rtb.corpus._problem import Problem, json_pointer


def duplicate_record_ids(rel: str, record_ids: Sequence[str]) -> list[Problem]:
    """A problem for each evidence record whose id an earlier record of the case already used."""
    return [
        Problem(
            file=rel,
            pointer=json_pointer(["evidence", index, "record_id"]),
            message=f"duplicate record id {record_id!r} within the case",
        )
        for index, record_id in enumerate(record_ids)
        if record_ids.index(record_id) != index
    ]


def unsupported_reason_codes(
    rel: str, expectations: Any, decision_of: Mapping[Any, Enum]
) -> list[Problem]:
    """A problem for each acceptable reason code that supports another decision than the key's.

    Args:
        rel: The case file.
        expectations: The case's answer key (`acceptable_reason_codes`, `reference_decision`).
        decision_of: The policy's reason code -> decision table.
    """
    reference = expectations.reference_decision
    return [
        Problem(
            file=rel,
            pointer=json_pointer(["expectations", "acceptable_reason_codes", index]),
            message=f"reason code {code.value!r} supports {decision_of[code].value}, not the "
            f"reference decision {reference.value}",
        )
        for index, code in enumerate(expectations.acceptable_reason_codes)
        if decision_of[code] is not reference
    ]


def candidate_visible_leaks(
    cases: Sequence[tuple[str, Any]], visible_fields: set[str]
) -> list[Problem]:
    """The parts a candidate will see must not mention any case's grader-only values.

    Pointers are those of the case file: the candidate-visible fields sit at the same paths.

    Args:
        cases: `(relative path, parsed case)` of every case of the corpus.
        visible_fields: The case's top-level fields a candidate sees.
    """
    forbidden = set().union(*(grader_only_values(case) for _, case in cases))
    return [
        Problem(
            file=rel,
            pointer=leak.pointer,
            message=f"candidate-visible content contains grader-only "
            f"{leak.kind.replace('_', ' ')} {leak.found!r}",
        )
        for rel, case in cases
        for leak in find_leaks(case.model_dump(mode="json", include=visible_fields), forbidden)
    ]
