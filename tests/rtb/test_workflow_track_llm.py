"""`rtb/workflow` with an LLM agent on core's provider, against the local scripted test server."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from tests.support.cli import invoke
from tests.support.openai_server import (
    Behaviour,
    OpenAIServer,
    client_error,
    openai_server,  # noqa: F401  (pytest fixture)
    reply,
)
from tests.support.records import full_record
from typer.testing import CliRunner

from trustbench.cli import app
from trustbench.core import read_ledger

ALLOWED = "dns_changes-01-permitted/direct"
DENIED = "dns_changes-03-unauthorized_parameters/direct"


def model_turn(body: dict[str, Any], _: int) -> Behaviour:
    """A scripted 'model': read, request the proposal, cite the commit if executed, stop."""
    messages = body["messages"]
    brief = json.loads(messages[1]["content"])
    turn = sum(m["role"] == "assistant" for m in messages)
    if turn == 0:
        calls = [
            {"name": "read_resource", "arguments": {"resource_id": brief["target"]}},
            {"name": "list_approvals", "arguments": {"target": brief["target"]}},
        ]
        return Behaviour("reply", tool_calls=calls)
    if turn == 1:
        return Behaviour(
            "reply", tool_calls=[{"name": "request_change", "arguments": brief["proposal"]}]
        )
    if turn == 2:
        result = json.loads(messages[-1]["content"])
        if result.get("status") == "executed":
            refs = {"summary": "applied", "evidence_refs": [result["commit_id"]]}
            return Behaviour("reply", tool_calls=[{"name": "report_completion", "arguments": refs}])
    return reply("Done.")


def llm_spec(base_url: str, *, extra_options: str = "", scenarios: list[str]) -> str:
    return f"""
suite = "rtb"
track = "workflow"
trials_per_case = 1
concurrency = 2
timeout_s = 5.0
order_seed = 5

[corpus]
builtin = "v0.1"

[retry]
transport_max_retries = 1
backoff_base_s = 0.01
backoff_max_s = 0.02

[track_options]
scenarios = {json.dumps(scenarios)}
budget = {{ max_steps = 30, max_tokens = 100000, max_wall_s = 30.0 }}
{extra_options}

[analysis]
bootstrap_resamples = 200

[[candidates]]
name = "llm"
kind = "openai_chat"
model = "test-model"
base_url = "{base_url}"
settings = {{ temperature = 0.0 }}
price = {{ input_per_mtok = 1.0, output_per_mtok = 2.0 }}
"""


def run(
    tmp_path: Path, text: str, *, run_code: int = 0, report_code: int = 0
) -> tuple[dict[str, Any], Path]:
    spec = tmp_path / "exp.toml"
    spec.write_text(text)
    run_dir = tmp_path / "run"
    assert invoke("freeze", str(spec), "--out", str(run_dir))[0] == 0
    # The scripted agent answers only the workflow's own turns (a preflight probe would make
    # it drop the connection), so this module runs past preflight (tested in test_preflight).
    code, out = invoke("run", str(run_dir), "--quiet", "--no-preflight")
    assert code == run_code, out
    code, out = invoke("report", str(run_dir))
    assert code == report_code, out
    return full_record(run_dir), run_dir


def test_llm_agent_completes_through_ctx_chat_and_is_graded_from_the_observer(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    openai_server.script(model_turn)
    record, run_dir = run(tmp_path, llm_spec(openai_server.base_url, scenarios=[ALLOWED, DENIED]))
    trials = {t["scenario_id"]: t for t in record["workflow"]["trials"]}
    allowed, denied = trials[ALLOWED], trials[DENIED]
    assert allowed["termination"] == "agent_stopped"
    assert allowed["steps"][0]["completion"] == "completed"
    assert [c["supported"] for c in allowed["claims"]] == [True]
    assert allowed["boundary"] == "reference"
    # the model asked for the out-of-approval change; the boundary refused; nothing took effect
    assert denied["prohibited_attempts"] == 1 and not denied["prohibited_effect"]
    assert denied["claims"] == []
    # every chat turn is a core attempt with its raw request, tokens and cost
    ledger = read_ledger(run_dir)
    for trial in ledger.trials:
        attempts = ledger.attempts_of(trial["trial_id"])
        run_record = trial["outcome"]["run"]
        model_calls = [e for e in run_record["trajectory"] if e["kind"] == "model_call"]
        assert len(attempts) == len(model_calls) >= 3
        assert all(a["call"] == "chat" and a["kind"] == "first" for a in attempts)
        assert run_record["tokens_used"] == sum(
            a["prompt_tokens"] + a["completion_tokens"] for a in attempts
        )
        assert run_record["cost_usd"] > 0
    assert len(openai_server.requests) == sum(
        len(ledger.attempts_of(t["trial_id"])) for t in ledger.trials
    )
    assert record["workflow"]["leak_scan"]["leaks"] == []


def test_llm_step_budget_from_track_options_ends_the_trial_and_the_task_is_not_completed(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    openai_server.script(model_turn)
    options = "[track_options.candidates.llm]\nbudget = { max_steps = 2 }"
    record, _ = run(
        tmp_path, llm_spec(openai_server.base_url, scenarios=[ALLOWED], extra_options=options)
    )
    (trial,) = record["workflow"]["trials"]
    assert trial["termination"] == "budget_exhausted" and trial["budget_exhausted"] == "steps"
    assert trial["steps"][0]["completion"] == "not_completed"
    assert record["workflow"]["configurations"]["llm"]["budget"]["max_steps"] == 2


def test_a_model_failing_mid_trial_fails_the_trial_but_its_observed_effect_still_counts(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    def failing_after_request(body: dict[str, Any], n: int) -> Behaviour:
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        return client_error() if turn == 2 else model_turn(body, n)

    openai_server.script(failing_after_request)
    options = '[track_options.candidates.llm]\nboundary = "unchecked"'
    # Its only trial failed: `run` exits 3 and the candidate is not evaluable (report exits 1).
    record, _ = run(
        tmp_path,
        llm_spec(openai_server.base_url, scenarios=[DENIED], extra_options=options),
        run_code=3,
        report_code=1,
    )
    (trial,) = record["workflow"]["trials"]
    assert trial["status"] == "failed" and trial["error_class"] == "client_error"
    assert trial["prohibited_effect"], "an effect caused before the failure must be graded"
    counts = record["workflow"]["counts"]["llm"]
    assert counts["prohibited_effect"] == {
        **counts["prohibited_effect"],
        "numerator": 1,
        "denominator": 1,
    }


def test_a_trial_that_failed_after_its_change_took_effect_is_not_completed_work(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    def failing_after_request(body: dict[str, Any], n: int) -> Behaviour:
        turn = sum(m["role"] == "assistant" for m in body["messages"])
        return client_error() if turn == 2 else model_turn(body, n)

    openai_server.script(failing_after_request)
    record, _ = run(
        tmp_path, llm_spec(openai_server.base_url, scenarios=[ALLOWED]), run_code=3, report_code=1
    )
    (trial,) = record["workflow"]["trials"]
    assert trial["status"] == "failed"
    # The observer did see the permitted change (the model requested it before failing), but
    # a failed trial is never counted as a completed workflow.
    assert [s["completion"] for s in trial["steps"]] == ["not_completed"]
    assert "trial failed (client_error)" in trial["steps"][0]["detail"]
    completion = next(
        f for f in record["figures"]["llm"] if f["name"] == "workflow_permitted_completion_rate"
    )
    assert (completion["numerator"], completion["denominator"]) == (0, 1)
    llm = record["evaluability"]["subjects"]["llm"]
    assert (llm["attempted"], llm["valid"], llm["transport_failed"], llm["evaluable"]) == (
        1,
        0,
        1,
        False,
    )


def test_an_unreachable_model_shows_no_estimate_in_its_breakdowns(tmp_path: Path) -> None:
    # Doing nothing causes no prohibited effect: 0% by scenario kind and by group, withheld.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    text = llm_spec(f"http://127.0.0.1:{port}/v1", scenarios=[ALLOWED, DENIED])
    record, run_dir = run(tmp_path, text, run_code=3, report_code=1)
    assert record["evaluability"]["subjects"]["llm"]["evaluable"] is False
    assert record["verdicts"]["llm"]["status"] == "not_evaluable"
    for section in ("by_kind", "by_group"):
        figures = [f for fs in record["workflow"][section]["llm"].values() for f in fs]
        assert figures and all(f["estimate"] is None for f in figures)
    page = (run_dir / "report.html").read_text()
    kinds = page.split("llm: prohibited-effect upper bound by scenario kind", 1)[1]
    kinds = kinds.split("</table>", 1)[0]
    assert "not evaluable" in kinds and "0.00%" not in kinds


def test_a_model_that_never_calls_a_tool_is_not_evaluable_and_says_why(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    """A server or model without tool calling answers in prose: never a safe, passing agent."""
    openai_server.script(lambda body, n: reply("I would read the resource first, then decide."))
    record, run_dir = run(tmp_path, llm_spec(openai_server.base_url, scenarios=[ALLOWED, DENIED]),
                          report_code=1)  # fmt: skip
    counts = record["evaluability"]["subjects"]["llm"]
    assert (counts["attempted"], counts["valid"], counts["invalid"]) == (2, 0, 2)
    assert counts["evaluable"] is False
    assert record["verdicts"]["llm"]["status"] == "not_evaluable"
    assert all(not t["passed"] for t in record["workflow"]["trials"])
    why = record["workflow"]["no_tool_call_trials"]["llm"]
    assert len(why) == 2 and "without calling a tool" in why[0] and "read the resource" in why[0]
    out = CliRunner().invoke(app, ["report", str(run_dir)]).output  # printed before exit 1
    assert "note: llm: 2 trial(s) invalid (no_tool_call): the model answered" in out
