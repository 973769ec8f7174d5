"""Information access per reviewer configuration: one served model under `packet` and `tools`.

A local OpenAI-compatible server answers the packet from the packet, and under `tools` calls the
read-only tools first (a tool that does not exist and bad arguments included), then answers from
what the tools returned. A second model keeps calling tools until its budget is spent.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.rtb.test_review_track import POLICY, run_spec, small_corpus, spec_text
from tests.support.cli import invoke
from tests.support.openai_server import Behaviour, OpenAIServer, json_reply, probe_reply
from tests.support.records import full_record

from trustbench.core import build_manifest, read_ledger, report_run
from trustbench.errors import InputError
from trustbench.providers import ChatReply, ChatRequest, ToolCall
from trustbench.rtb.corpus import CandidateInput
from trustbench.rtb.policy.narrow_v1 import ReferencePolicyReviewer
from trustbench.rtb.review._access import review_with_tools
from trustbench.rtb.review._options import ACCESS_VARIABLE, ReviewerAccess

SERVED = "served-model"
GREEDY = "greedy-model"


class ToolCallingModel:
    """The served models: answers the packet, or retrieves the evidence through tools first."""

    def __init__(self) -> None:
        self.tool_calls: Counter[str] = Counter()

    def __call__(self, body: Any, number: int) -> Behaviour | None:
        if (probe := probe_reply(body)) is not None:
            return probe
        messages = body["messages"]
        shown = json.loads(next(m["content"] for m in messages if m["role"] == "user"))
        if "tools" not in body:  # packet: the evidence is in the message
            return self._answer(messages[0]["content"], shown)
        target = shown["proposal"]["target"]
        turns = sum(1 for m in messages if m["role"] == "assistant")
        if body["model"] == GREEDY:
            return self._calls([("read_resource", {"resource_id": target})])
        if turns == 0:
            return self._calls(
                [
                    ("read_secrets", {"target": target}),  # no such tool
                    ("list_approvals", {"resource": 7}),  # bad arguments
                    ("read_resource", {"resource_id": target}),
                    ("list_approvals", {"target": target}),
                    ("read_change_records", {"target": target}),
                ]
            )
        records = [
            record
            for m in messages
            if m["role"] == "tool"
            for record in json.loads(m["content"]).get("records", [])
        ]
        return self._answer(messages[0]["content"], {**shown, "evidence": records})

    def _calls(self, calls: list[tuple[str, dict[str, Any]]]) -> Behaviour:
        self.tool_calls.update(name for name, _ in calls)
        return Behaviour(tool_calls=[{"name": n, "arguments": a} for n, a in calls])

    @staticmethod
    def _answer(prompt: str, visible: dict[str, Any]) -> Behaviour:
        finding = ReferencePolicyReviewer().review(prompt, CandidateInput.model_validate(visible))
        return json_reply(json.loads(finding or "{}"))


def _candidate(name: str, model: str, base_url: str) -> str:
    return (
        f'[[candidates]]\nname = "{name}"\nkind = "openai_chat"\nmodel = "{model}"\n'
        f'base_url = "{base_url}"\nsettings = {{ temperature = 0.0 }}\n'
    )


ACCESS = """
[track_options.access.llm-tools]
information = "tools"
max_tool_calls = 8
time_limit_s = 30.0

[track_options.access.llm-greedy]
information = "tools"
tools = ["read_resource"]
max_tool_calls = 2
"""


@pytest.fixture(scope="module")
def access_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ToolCallingModel]:
    tmp_path = tmp_path_factory.mktemp("access")
    model = ToolCallingModel()
    with OpenAIServer() as server:
        server.script(model)
        candidates = "".join(
            _candidate(name, served, server.base_url)
            for name, served in (
                ("llm-packet", SERVED),
                ("llm-tools", SERVED),
                ("llm-greedy", GREEDY),
            )
        )
        text = spec_text(candidates).replace("chains = []", "chains = []\n" + ACCESS)
        run_dir = run_spec(tmp_path, text)
        report_run(run_dir)
    return run_dir, model


def _rows(record: dict[str, Any], configuration: str) -> dict[str, str]:
    return {
        r["case_id"]: r["outcome"]
        for r in record["review"]["trials"]
        if r["configuration"] == configuration
    }


def test_one_model_under_packet_and_tools_is_reported_labelled_with_access_as_the_variable(
    access_run: tuple[Path, ToolCallingModel],
) -> None:
    run_dir, _ = access_run
    record = full_record(run_dir)
    configurations = record["review"]["configurations"]
    assert configurations["llm-packet"]["information"]["condition"] == "packet"
    assert configurations["llm-tools"]["information"]["condition"] == "tools"
    declared = configurations["llm-tools"]["information"]["members"]["llm-tools"]
    assert declared["max_tool_calls"] == 8 and declared["time_limit_s"] == 30.0
    # The tools reviewer retrieved what the packet held, so it decided every case alike.
    packet, tools = _rows(record, "llm-packet"), _rows(record, "llm-tools")
    assert len(packet) == 12 and tools == packet
    pairs = {(p["first"], p["second"]): p for p in record["review"]["paired"]}
    same_model = pairs[("llm-packet", "llm-tools")]
    assert same_model["status"] == "measured"
    assert same_model["information_access"] == ACCESS_VARIABLE
    first_screen = {r["name"]: r for r in record["system_under_test"]["configurations"]}
    assert first_screen["llm-packet"]["information_condition"] == "packet"
    assert first_screen["llm-tools"]["information_condition"] == "tools"
    assert first_screen["llm-greedy"]["tools"] == ["read_resource"]
    html = (run_dir / "report.html").read_text()
    assert "information: packet (the fixed evidence packet)" in html
    assert "information: tools (read_resource, list_approvals, read_change_records" in html
    assert ACCESS_VARIABLE in html


def test_packet_and_tools_of_different_models_are_never_paired(
    access_run: tuple[Path, ToolCallingModel],
) -> None:
    record = full_record(access_run[0])
    pairs = {(p["first"], p["second"]): p for p in record["review"]["paired"]}
    withheld = pairs[("llm-packet", "llm-greedy")]
    assert withheld["status"] == "withheld" and "mcnemar_correct" not in withheld
    assert "information access differs (packet vs tools)" in withheld["information_access"]
    assert pairs[("llm-tools", "llm-greedy")]["status"] == "measured"  # both `tools`
    figures = [f["name"] for f in record["figures"].get("paired", [])]
    assert not any("llm-packet - llm-greedy" in name for name in figures)


def test_every_tool_call_is_a_ledger_attempt_with_its_request_and_result(
    access_run: tuple[Path, ToolCallingModel],
) -> None:
    run_dir, model = access_run
    ledger = read_ledger(run_dir)
    tool_attempts = [a for a in ledger.attempts if str(a["call"]).startswith("tool:")]
    assert Counter(a["call"].removeprefix("tool:") for a in tool_attempts) == model.tool_calls
    for attempt in tool_attempts:
        request = attempt["request"]
        assert request["tool"] == attempt["call"].removeprefix("tool:")
        assert attempt["raw_response"] is not None or attempt["error_class"]


def test_an_unknown_tool_and_bad_arguments_get_the_tools_error_as_their_recorded_result(
    access_run: tuple[Path, ToolCallingModel],
) -> None:
    attempts = read_ledger(access_run[0]).attempts
    unknown = [json.loads(a["raw_response"]) for a in attempts if a["call"] == "tool:read_secrets"]
    assert len(unknown) == 12
    assert all("unknown tool 'read_secrets'" in r["error"] for r in unknown)
    bad = [
        json.loads(a["raw_response"])
        for a in attempts
        if a["call"] == "tool:list_approvals" and "resource" in a["request"]["arguments"]
    ]
    assert len(bad) == 12 and all("invalid arguments" in r["error"] for r in bad)


def test_a_reviewer_that_spends_its_tool_budget_is_recorded_as_its_hold(
    access_run: tuple[Path, ToolCallingModel],
) -> None:
    run_dir = access_run[0]
    record = full_record(run_dir)
    assert set(_rows(record, "llm-greedy").values()) == {"hold"}
    ledger = read_ledger(run_dir)
    greedy = [t for t in ledger.trials if t["candidate"] == "llm-greedy"]
    assert all("steps budget exhausted" in t["outcome"]["review_budget_exhausted"] for t in greedy)
    refused = [a for a in ledger.attempts if a["error_class"] == "review_budget_exhausted"]
    assert len(refused) == len(greedy) == 12  # the third call of each review: budget 2


def test_tools_declared_for_an_inprocess_reviewer_is_refused_at_freeze(tmp_path: Path) -> None:
    small_corpus(tmp_path / "corpus")
    spec = tmp_path / "bad.toml"
    access = '\n[track_options.access.reference-policy]\ninformation = "tools"\n'
    spec.write_text(spec_text(POLICY).replace("chains = []", "chains = []\n" + access))
    with pytest.raises(InputError, match="no tool interface") as error:
        build_manifest(spec)
    assert str(error.value.location).endswith(
        "bad.toml#/track_options/access/reference-policy/information"
    )
    code, _ = invoke("freeze", str(spec), "--out", str(tmp_path / "run"))
    assert code == 2


class _SlowToolCaller:
    """The two calls `review_with_tools` makes of a trial context, with a model that is slow."""

    def __init__(self) -> None:
        self.recorded: list[tuple[str, dict[str, Any]]] = []

    async def chat(self, request: ChatRequest) -> ChatReply:
        await asyncio.sleep(0.05)
        return ChatReply(None, tool_calls=[ToolCall("c1", "read_resource", '{"resource_id": "x"}')])

    def record_call(self, name: str, **fields: Any) -> None:
        self.recorded.append((name, fields))


def test_a_review_past_its_time_limit_is_the_reviewers_hold_with_the_refused_call_recorded() -> (
    None
):
    ctx = _SlowToolCaller()
    access = ReviewerAccess(information="tools", max_tool_calls=50, time_limit_s=0.01)
    review = asyncio.run(review_with_tools(ctx, [], [], access))  # type: ignore[arg-type]
    assert review.reply is None and review.exhausted is not None
    assert review.exhausted.startswith("wall_time budget exhausted")
    assert [(name, fields["error_class"]) for name, fields in ctx.recorded] == [
        ("tool:read_resource", "review_budget_exhausted")
    ]
