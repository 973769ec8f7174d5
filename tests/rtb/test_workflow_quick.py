"""`trustbench rtb workflow --model openai/NAME`: the workflow track's spec-free quick path,
against the local OpenAI-compatible test server playing a tool-calling agent. It writes the spec
it froze into the run folder, runs freeze, run and report, and exits as `report` does."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from test_workflow_llm import scripted_turn
from tests.support.cli import invoke
from tests.support.openai_server import (
    Behaviour,
    OpenAIServer,
    openai_server,  # noqa: F401
    probe_reply,
)


def _agent(body: Any, number: int) -> Behaviour | None:
    """Read, request the proposal, cite the commit it got, stop (the preflight probe: 'ready')."""
    probe = probe_reply(body)
    if probe is not None:
        return probe
    turn = scripted_turn(body["messages"])
    calls = [{"name": c.name, "arguments": json.loads(c.arguments)} for c in turn.tool_calls]
    return Behaviour("reply", text=turn.content, tool_calls=calls or None)


def test_a_tool_calling_model_acts_as_the_agent_and_its_spec_reruns(
    openai_server: OpenAIServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    openai_server.script(_agent)
    run = tmp_path / "run"
    code, output = invoke(
        "rtb", "workflow", "--model", "openai/tool-bot", "--base-url", openai_server.base_url,
        "--limit", "3", "--out", str(run),
    )  # fmt: skip
    assert code == 4, output  # --limit: incomplete, nothing released
    spec = run / "spec.toml"
    assert f"spec: {spec}" in output and (run / "report.html").is_file()
    data = tomllib.loads(spec.read_text())
    assert data["track"] == "workflow" and data["track_options"]["boundary"] == "reference"
    (candidate,) = data["candidates"]
    assert candidate["kind"] == "openai_chat" and candidate["model"] == "tool-bot"
    assert candidate["base_url"] == openai_server.base_url and "api_key_env" not in candidate
    record = json.loads((run / "record.json").read_text())
    assert record["verdicts"]["tool-bot"]["status"] == "incomplete"
    turns = [r.body for r in openai_server.requests if r.path.endswith("completions")]
    agent_turns = [b for b in turns if b.get("tools")]
    assert {b["model"] for b in turns} == {"tool-bot"}
    # Three trials, each at least a first turn and a tool result sent back to the model.
    assert len(agent_turns) >= 6
    assert any(m["role"] == "tool" for b in agent_turns for m in b["messages"])
    assert invoke("verify", str(run))[0] == 0
    # The written spec is an ordinary spec: it freezes again as it stands.
    assert invoke("freeze", str(spec), "--out", str(tmp_path / "again"))[0] == 0
