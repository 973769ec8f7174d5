"""Scan everything an agent could see in a workflow trial for grader-only information.

Candidate-visible here means: every task brief, every tool call and result in the trajectory, the
tool schemas, the agent's working folder and its environment variables. Forbidden: answer-key field
names (as keys, or as words in any string), the workflow expectations' own field names, and the
grader-only values of the cases and scenarios (case ids, variants, acceptable reason codes,
decisive conditions, authoring notes, preserved disagreements, scenario ids and expectation
sources).

The matching is the corpus's own scanner (`trustbench.rtb.find_leaks`: identifier-like values as
whole tokens, case-insensitively; phrases as case-insensitive substrings after collapsing
whitespace), so the exporter and the workflow harness cannot disagree on what a leak is. The
workflow expectation field names are passed to it as forbidden identifiers (a key is scanned as
text) and reported back as `answer_key_field`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from trustbench._docstrings import documented
from trustbench.rtb.corpus._leakscan import ANSWER_KEY_FIELDS as CORPUS_ANSWER_KEY_FIELDS
from trustbench.rtb.corpus._leakscan import find_leaks as find_corpus_leaks
from trustbench.rtb.corpus._leakscan import grader_only_values
from trustbench.rtb.policy._protocol import AuthoredCase
from trustbench.rtb.workflow._models import WorkflowScenario, WorkflowTrialRun

if TYPE_CHECKING:
    from trustbench.core import LedgerContents

EXPECTATION_FIELDS: frozenset[str] = frozenset(
    {"expectation_source", "requested_change", "tempts_prohibited_effect"}
)
"""Field names of the workflow expectations: like the answer-key fields, none may be a key of a
candidate-visible payload or a word in one of its strings."""
ANSWER_KEY_FIELDS: frozenset[str] = CORPUS_ANSWER_KEY_FIELDS | EXPECTATION_FIELDS
"""Every field name the scan forbids (the corpus's answer key plus the workflow expectations)."""


class Leak(BaseModel):
    """One grader-only item found where an agent could see it."""

    model_config = documented(frozen=True)

    where: str
    """Which payload (e.g. `trajectory/12/result/message`, `workspace/notes.json`, `env/X`)."""
    kind: str
    """`answer_key_field` or `grader_value`."""
    found: str
    """What matched."""


def scenario_grader_values(
    scenarios: Sequence[WorkflowScenario], cases: Sequence[AuthoredCase]
) -> set[str]:
    """Grader-only values of every case plus every scenario id and expectation source."""
    values: set[str] = set()
    for case in cases:
        values |= grader_only_values(case)
    for scenario in scenarios:
        values.add(scenario.scenario_id)
        values |= {s.expectation_source for s in scenario.expectations.steps}
    return values


def find_leaks(payload: Any, forbidden: Iterable[str], where: str = "") -> list[Leak]:
    """Answer-key field names and forbidden values anywhere in a JSON-like payload or string.

    Args:
        payload: Dicts, lists, strings, numbers.
        forbidden: Grader-only values.
        where: Name of the payload, prefixed to every location.

    Returns:
        Every leak found; empty when clean.
    """
    found = find_corpus_leaks(payload, frozenset(forbidden) | EXPECTATION_FIELDS)
    return [
        Leak(
            where=f"{where}{leak.pointer}",
            kind="answer_key_field" if leak.found in EXPECTATION_FIELDS else leak.kind,
            found=leak.found,
        )
        for leak in found
    ]


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


def leak_scan_record(
    runs: dict[str, WorkflowTrialRun],
    ledger: LedgerContents,
    forbidden: set[str],
    review_prompt: str | None = None,
) -> dict[str, Any]:
    """Scan every recorded candidate-visible payload for grader-only values.

    Candidate-visible: each trial's briefs, tool calls and results, working folder and
    environment (`candidate_visible`), plus the exact request body of every model attempt
    (system prompt, messages, tool schemas), which is what an LLM agent actually read.

    A reviewer's attempt in the loop opens with the corpus's review prompt (`review_prompt`),
    which states the reason-code vocabulary to every reviewer by design; it is scanned without
    that shared message, so the live input a reviewer received is still scanned in full.
    """
    leaks: list[dict[str, str]] = []
    payloads = 0
    for trial_id, run in runs.items():
        for where, payload in candidate_visible(run):
            payloads += 1
            leaks += [
                {"trial_id": trial_id, "where": leak.where, "kind": leak.kind, "found": leak.found}
                for leak in find_leaks(payload, forbidden, where)
            ]
        for attempt in ledger.attempts_of(trial_id):
            payloads += 1
            where = f"attempt/{attempt['call_index']}.{attempt['attempt_index']}/request"
            request = _without_review_prompt(attempt["request"], review_prompt)
            leaks += [
                {"trial_id": trial_id, "where": leak.where, "kind": leak.kind, "found": leak.found}
                for leak in find_leaks(request, forbidden, where)
            ]
    return {"payloads_scanned": payloads, "leaks": leaks}


def _without_review_prompt(request: Any, review_prompt: str | None) -> Any:
    """A reviewer's request body less its shared review prompt; any other request unchanged."""
    messages = request.get("messages") if isinstance(request, dict) else None
    if not review_prompt or not isinstance(messages, list) or not messages:
        return request
    first = messages[0]
    if not (isinstance(first, dict) and first.get("content") == review_prompt):
        return request
    return {**request, "messages": messages[1:]}
