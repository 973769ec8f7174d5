"""Scan everything an agent could see in a workflow trial for grader-only information.

Candidate-visible here means: every task brief, every tool call and result in the trajectory, the
tool schemas, the agent's working folder and its environment variables. Forbidden: answer-key field
names (as keys, or as words in any string) and the grader-only values of the cases and scenarios
(case ids, variants, acceptable reason codes, decisive conditions, authoring notes, preserved
disagreements, scenario ids and expectation sources).

This is a small local scanner with the same matching rules as the corpus exporter's leak scan
(identifier-like values match as whole tokens, case-insensitively; phrases as case-insensitive
substrings after collapsing whitespace); it can be replaced by that one once both are merged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict

from trustbench.rtb._models import Case
from trustbench.rtb.workflow._models import WorkflowScenario, WorkflowTrialRun

ANSWER_KEY_FIELDS: frozenset[str] = frozenset(
    {
        "case_id",
        "expectations",
        "reference_decision",
        "acceptable_reason_codes",
        "decisive_record_ids",
        "decisive_condition",
        "explanation_terms",
        "reference_status",
        "authoring",
        "expectation_source",
        "requested_change",
        "tempts_prohibited_effect",
    }
)
"""Field names of the answer key, the case identity and the workflow expectations: none may be a
key of a candidate-visible payload; those with an underscore may not appear in any string."""


class Leak(BaseModel):
    """One grader-only item found where an agent could see it."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    where: str
    """Which payload (e.g. `trajectory/12/result/message`, `workspace/notes.json`, `env/X`)."""
    kind: str
    """`answer_key_field` or `grader_value`."""
    found: str
    """What matched."""


def grader_only_values(case: Case) -> set[str]:
    """The values of a case an agent must never see."""
    values = {
        case.case_id,
        case.variant,
        *(code.value for code in case.expectations.acceptable_reason_codes),
        case.expectations.decisive_condition,
        case.authoring.notes,
        *case.reference_status.disagreements,
    }
    return {v for v in values if v.strip()}


def scenario_grader_values(
    scenarios: Sequence[WorkflowScenario], cases: Sequence[Case]
) -> set[str]:
    """Grader-only values of every case plus every scenario id and expectation source."""
    values: set[str] = set()
    for case in cases:
        values |= grader_only_values(case)
    for scenario in scenarios:
        values.add(scenario.scenario_id)
        values |= {s.expectation_source for s in scenario.expectations.steps}
    return values


def _pattern(value: str) -> re.Pattern[str]:
    collapsed = " ".join(value.split())
    if " " in collapsed:
        return re.compile(re.escape(collapsed), re.IGNORECASE)
    return re.compile(rf"(?<![A-Za-z0-9_]){re.escape(collapsed)}(?![A-Za-z0-9_])", re.IGNORECASE)


@lru_cache(maxsize=32)
def _compiled(
    values: frozenset[str],
) -> tuple[re.Pattern[str] | None, list[tuple[str, re.Pattern[str]]]]:
    """One screening alternation (most strings are clean) plus the exact pattern per value."""
    exact = [(v, _pattern(v)) for v in sorted(values) if v.strip()]
    if not exact:
        return None, []
    literals = sorted({" ".join(v.split()).lower() for v, _ in exact}, key=len, reverse=True)
    return re.compile("|".join(re.escape(x) for x in literals)), exact


def find_leaks(payload: Any, forbidden: Iterable[str], where: str = "") -> list[Leak]:
    """Answer-key field names and forbidden values anywhere in a JSON-like payload or string.

    Args:
        payload: Dicts, lists, strings, numbers.
        forbidden: Grader-only values.
        where: Name of the payload, prefixed to every location.

    Returns:
        Every leak found; empty when clean.
    """
    checks = [
        ("answer_key_field", _compiled(frozenset(f for f in ANSWER_KEY_FIELDS if "_" in f))),
        ("grader_value", _compiled(frozenset(forbidden))),
    ]
    leaks: list[Leak] = []

    def text(s: str, at: str) -> None:
        collapsed = " ".join(s.split())
        lowered = collapsed.lower()
        for kind, (screen, exact) in checks:
            if screen is not None and screen.search(lowered):
                leaks.extend(
                    Leak(where=at, kind=kind, found=v) for v, p in exact if p.search(collapsed)
                )

    def walk(node: Any, at: str) -> None:
        if isinstance(node, Mapping):
            for key, child in node.items():
                if str(key).lower() in ANSWER_KEY_FIELDS:
                    leaks.append(Leak(where=f"{at}/{key}", kind="answer_key_field", found=str(key)))
                else:
                    text(str(key), f"{at}/{key}")
                walk(child, f"{at}/{key}")
        elif isinstance(node, list | tuple):
            for index, child in enumerate(node):
                walk(child, f"{at}/{index}")
        elif isinstance(node, str):
            text(node, at)

    walk(payload, where)
    return leaks


def candidate_visible(run: WorkflowTrialRun) -> Iterator[tuple[str, Any]]:
    """Every candidate-visible payload of a trial, named.

    Yields:
        (name, payload) for each task brief, tool call (arguments and result), workspace file and
        environment variable given to the agent.
    """
    for event in run.trajectory:
        if event.kind == "task":
            yield f"trajectory/{event.seq}/brief", event.result
        elif event.kind == "tool_call":
            yield f"trajectory/{event.seq}/arguments", event.arguments
            yield f"trajectory/{event.seq}/result", event.result
    for path, content in run.workspace_files.items():
        yield f"workspace/{path}", content
    for name, value in run.agent_env.items():
        yield f"env/{name}", [name, value]


def scan_trial(
    run: WorkflowTrialRun, forbidden: Iterable[str], *, process_env: bool = True
) -> list[Leak]:
    """Scan one trial's candidate-visible payloads (and, by default, this process's environment).

    Args:
        run: The trial run.
        forbidden: Grader-only values (`scenario_grader_values`).
        process_env: Also scan `os.environ`, which an in-process agent can read.

    Returns:
        Every leak found.
    """
    values = frozenset(forbidden)
    leaks = [
        leak
        for name, payload in candidate_visible(run)
        for leak in find_leaks(payload, values, name)
    ]
    if process_env:
        leaks += find_leaks(dict(os.environ), values, "process_env")
    return leaks
