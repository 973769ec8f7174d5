"""Workflow track: the LLM agent via a scripted chat function and a local OpenAI-style server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web
from test_control_fixtures import make_cases

from trustbench.rtb.boundaries import boundary_factory
from trustbench.rtb.workflow import (
    ChatTurn,
    LLMAgent,
    ModelUsage,
    ToolCallRequest,
    WorkflowBudget,
    WorkflowScenario,
    grade_workflow_trial,
    openai_compatible_chat,
    run_workflow_trial,
    workflow_scenarios,
)

SCENARIOS = workflow_scenarios(make_cases())
ALLOWED = next(
    s for s in SCENARIOS if s.script.kind == "direct" and s.expectations.steps[0].allowed
)
TEMPTING = next(
    s for s in SCENARIOS if s.script.kind == "direct" and not s.expectations.steps[0].allowed
)


def scripted_turn(messages: list[dict[str, Any]], usage: ModelUsage | None = None) -> ChatTurn:
    """A scripted 'model': read, request the proposal, cite the commit it got, stop."""
    brief = json.loads(messages[1]["content"])
    turn = sum(m["role"] == "assistant" for m in messages)
    usage = usage or ModelUsage(prompt_tokens=100, completion_tokens=20, cost_usd=0.001)

    def call(index: int, name: str, arguments: Any) -> ToolCallRequest:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return ToolCallRequest(id=f"call-{turn}-{index}", name=name, arguments=text)

    if turn == 0:
        target = {"resource_id": brief["target"]}
        calls = [
            call(0, "read_resource", target),
            call(1, "list_approvals", {"target": brief["target"]}),
        ]
        return ChatTurn(content=None, tool_calls=calls, usage=usage)
    if turn == 1:
        return ChatTurn(tool_calls=[call(0, "request_change", brief["proposal"])], usage=usage)
    if turn == 2:
        result = json.loads(messages[-1]["content"])
        if result.get("status") == "executed":
            refs = {"summary": "applied", "evidence_refs": [result["commit_id"]]}
            return ChatTurn(tool_calls=[call(0, "report_completion", refs)], usage=usage)
    return ChatTurn(content="Done.", usage=usage)


def _run(
    scenario: WorkflowScenario, agent: LLMAgent, budget: WorkflowBudget | None = None
) -> tuple[Any, Any]:
    run = asyncio.run(
        run_workflow_trial(
            scenario.script, lambda: agent, boundary_factory("reference"), budget=budget
        )
    )
    return run, grade_workflow_trial(scenario, run)


async def _fake_chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ChatTurn:
    assert {t["function"]["name"] for t in tools} >= {"request_change", "report_completion"}
    return scripted_turn(messages)


def test_llm_agent_completes_a_task_graded_from_the_observer() -> None:
    run, grade = _run(ALLOWED, LLMAgent(_fake_chat, name="scripted-llm"))
    assert run.agent == "scripted-llm" and run.termination.status == "agent_stopped"
    kinds = [e.kind for e in run.trajectory]
    assert kinds.count("model_call") == 4 and kinds.count("tool_call") == 4
    assert grade.steps[0].completion == "completed"
    assert [c.supported for c in grade.claims] == [True]
    assert run.tokens_used == 4 * 120 and run.cost_usd is not None
    assert abs(run.cost_usd - 0.004) < 1e-9


def test_llm_agent_refused_by_the_boundary_makes_no_claim_and_no_effect() -> None:
    _, grade = _run(TEMPTING, LLMAgent(_fake_chat))
    assert not grade.prohibited_effect and grade.prohibited_attempts == 1 and grade.claims == []


def _usage_chat(usage: ModelUsage) -> Any:
    async def chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ChatTurn:
        return scripted_turn(messages, usage)

    return chat


def test_token_budget_ends_the_trial_as_budget_exhausted_and_keeps_the_calls() -> None:
    usage = ModelUsage(prompt_tokens=800, completion_tokens=200)
    run, grade = _run(ALLOWED, LLMAgent(_usage_chat(usage)), WorkflowBudget(max_tokens=1500))
    assert run.termination.status == "budget_exhausted" and run.termination.budget == "tokens"
    assert [e.kind for e in run.trajectory].count("model_call") == 2
    assert run.cost_usd is None  # cost never reported: unknown, not zero
    assert grade.steps[0].completion == "not_completed" and not grade.passed


def test_cost_budget_ends_the_trial_as_budget_exhausted() -> None:
    usage = ModelUsage(prompt_tokens=1, completion_tokens=1, cost_usd=0.01)
    run, _ = _run(ALLOWED, LLMAgent(_usage_chat(usage)), WorkflowBudget(max_cost_usd=0.015))
    assert run.termination.budget == "cost"


def test_step_budget_counts_model_and_tool_calls() -> None:
    run, _ = _run(ALLOWED, LLMAgent(_fake_chat), WorkflowBudget(max_steps=2))
    assert run.termination.budget == "steps" and run.steps_used == 2


def test_unparsable_tool_arguments_are_recorded_and_returned_as_errors() -> None:
    seen: list[str] = []

    async def chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ChatTurn:
        if not any(m["role"] == "tool" for m in messages):
            bad = ToolCallRequest(id="c1", name="read_resource", arguments="{not json")
            return ChatTurn(tool_calls=[bad])
        seen.append(messages[-1]["content"])
        return ChatTurn(content="giving up")

    run, grade = _run(ALLOWED, LLMAgent(chat))
    assert "not JSON" in seen[0]
    call = next(e for e in run.trajectory if e.kind == "tool_call")
    assert call.arguments == {"unparsed": "{not json"} and "error" in call.result
    assert grade.steps[0].completion == "not_completed"


# --- a tiny OpenAI-compatible server on 127.0.0.1 ----------------------------------------


def _check_shapes(messages: list[dict[str, Any]]) -> None:
    """The agent sends well-formed OpenAI tool-calling conversations."""
    assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
    open_ids: set[str] = set()
    for message in messages[2:]:
        if message["role"] == "assistant":
            open_ids |= {c["id"] for c in message.get("tool_calls", [])}
            for c in message.get("tool_calls", []):
                assert c["type"] == "function" and isinstance(c["function"]["arguments"], str)
        else:
            assert message["role"] == "tool" and message["tool_call_id"] in open_ids


async def _completions(request: web.Request) -> web.Response:
    body = await request.json()
    assert body["model"] == "scripted" and body["tools"]
    _check_shapes(body["messages"])
    turn = scripted_turn(body["messages"])
    message: dict[str, Any] = {"role": "assistant", "content": turn.content}
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in turn.tool_calls
        ]
    return web.json_response(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": "scripted",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if turn.tool_calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
        }
    )


def test_llm_agent_against_a_local_openai_compatible_server_is_graded_from_the_observer() -> None:
    async def main() -> tuple[Any, Any]:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", _completions)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        try:
            chat = openai_compatible_chat(
                f"http://127.0.0.1:{port}/v1", "scripted", usd_per_million_tokens=(1.0, 2.0)
            )
            run = await run_workflow_trial(
                ALLOWED.script, lambda: LLMAgent(chat), boundary_factory("reference")
            )
        finally:
            await runner.cleanup()
        return run, grade_workflow_trial(ALLOWED, run)

    run, grade = asyncio.run(main())
    assert run.termination.status == "agent_stopped", run.termination
    assert grade.steps[0].completion == "completed"
    assert [c.supported for c in grade.claims] == [True] and not grade.prohibited_effect
    assert run.tokens_used == 4 * 60
    assert run.cost_usd is not None and abs(run.cost_usd - 4 * (50 + 20) / 1e6) < 1e-12
