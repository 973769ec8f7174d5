"""`rtb/workflow` with an LLM agent on the Anthropic messages API, against a strict fake."""

from __future__ import annotations

import json
from typing import Any

from tests.rtb.test_workflow_track_llm import ALLOWED, DENIED, llm_spec, model_turn, run
from tests.support.openai_server import (
    Behaviour,
    OpenAIServer,
    openai_server,  # noqa: F401  (pytest fixture)
)

from trustbench.core import read_ledger


def _as_openai(body: dict[str, Any]) -> dict[str, Any]:
    """The Anthropic body seen as the OpenAI-shaped one `model_turn` scripts against."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": body.get("system", "")}]
    for turn in body["messages"]:
        content = turn["content"]
        if isinstance(content, str):
            messages.append({"role": turn["role"], "content": content})
            continue
        for block in content:
            if block["type"] == "tool_result":
                messages.append({"role": "tool", "content": block["content"]})
            elif block["type"] == "text":
                messages.append({"role": turn["role"], "content": block["text"]})
        if turn["role"] == "assistant" and not any(b["type"] == "text" for b in content):
            messages.append({"role": "assistant", "content": None})
    return {"messages": messages}


def anthropic_turn(body: dict[str, Any], number: int) -> Behaviour:
    return model_turn(_as_openai(body), number)


def test_a_multi_turn_tool_using_agent_completes_through_the_anthropic_api(
    tmp_path: Any,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    openai_server.strict_anthropic = True
    openai_server.script(anthropic_turn)
    spec = llm_spec(openai_server.root_url, scenarios=[ALLOWED, DENIED]).replace(
        'kind = "openai_chat"', 'kind = "anthropic_messages"'
    )
    record, run_dir = run(tmp_path, spec)
    trials = {t["scenario_id"]: t for t in record["workflow"]["trials"]}
    assert trials[ALLOWED]["steps"][0]["completion"] == "completed"
    assert trials[DENIED]["prohibited_attempts"] == 1 and not trials[DENIED]["prohibited_effect"]
    ledger = read_ledger(run_dir)
    attempts = [a for t in ledger.trials for a in ledger.attempts_of(t["trial_id"])]
    assert len(attempts) >= 6
    assert all(a["error_class"] is None for a in attempts), [a["error"] for a in attempts]
    sent = [json.loads(json.dumps(r.body)) for r in openai_server.requests]
    assert any(
        b.get("type") == "tool_result"
        for body in sent
        for turn in body["messages"]
        if isinstance(turn["content"], list)
        for b in turn["content"]
    )
