"""`trustbench rtb review --model openai/NAME`: the spec-free quick path, against the local
OpenAI-compatible test server. It writes the spec it froze into the run folder, runs freeze, run
and report, and exits as `report` does; the spec is an ordinary one that reruns as written."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import invoke
from tests.support.openai_server import (
    Behaviour,
    OpenAIServer,
    json_reply,
    openai_server,  # noqa: F401
)

from trustbench.rtb.corpus._load import DEFAULT_VERSION
from trustbench.rtb.policy import parse_candidate_input, policy_of


def _reference_answers(body: Any, number: int) -> Behaviour | None:
    """The written policy's reply to each case, in the policy of the corpus the input is of (the
    preflight probe gets the default echo)."""
    try:
        visible = parse_candidate_input(body["messages"][-1]["content"])
    except ValueError:
        return None
    policy = policy_of(visible)
    reviewer = next(f(0) for n, f in policy.reviewers.items() if n.startswith("reference-policy"))
    prompt = body["messages"][0]["content"]
    return json_reply(json.loads(reviewer.review(prompt, visible) or "{}"))


def test_a_model_answering_by_the_policy_passes_and_its_spec_reruns(
    openai_server: OpenAIServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    openai_server.script(_reference_answers)
    run = tmp_path / "run"
    code, output = invoke(
        "rtb", "review", "--model", "openai/policy-bot", "--base-url", openai_server.base_url,
        "--out", str(run),
    )  # fmt: skip
    assert code == 0, output
    spec = run / "spec.toml"
    assert f"spec: {spec}" in output
    data = tomllib.loads(spec.read_text())
    (candidate,) = data["candidates"]
    assert candidate["model"] == "policy-bot" and candidate["base_url"] == openai_server.base_url
    assert "api_key_env" not in candidate  # a --base-url server gets no key
    assert data["corpus"] == {"builtin": f"v{DEFAULT_VERSION}"}  # the reviewer-side default
    assert {gate["name"] for gate in data["gates"]} >= {"false-approvals", "unsupported-permits"}
    record = json.loads((run / "record.json").read_text())
    assert record["verdicts"]["policy-bot"]["status"] == "passed"
    models = {r.body["model"] for r in openai_server.requests if r.path.endswith("completions")}
    assert models == {"policy-bot"}
    assert invoke("verify", str(run))[0] == 0
    # The written spec is an ordinary spec: it freezes again as it stands.
    assert invoke("freeze", str(spec), "--out", str(tmp_path / "again"))[0] == 0


def test_limit_runs_a_few_trials_and_says_the_run_is_incomplete(
    openai_server: OpenAIServer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, output = invoke(
        "rtb", "review", "--model", "openai/echo-bot", "--base-url", openai_server.base_url,
        "--limit", "5",
    )  # fmt: skip
    assert code == 4, output  # incomplete: nothing is released
    run = tmp_path / "runs" / "review-echo-bot"
    assert (run / "spec.toml").is_file() and (run / "report.html").is_file()
    record = json.loads((run / "record.json").read_text())
    assert record["verdicts"]["echo-bot"]["status"] == "incomplete"
    # Rerunning the same command resumes the same run folder (same spec), never a second spec.
    code, _ = invoke(
        "rtb", "review", "--model", "openai/echo-bot", "--base-url", openai_server.base_url,
        "--limit", "5",
    )  # fmt: skip
    assert code == 4


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("opnai/gpt-4o-mini", "unknown provider 'opnai'; did you mean 'openai'?"),
        ("gpt-4o-mini", "must be PROVIDER/NAME"),
    ],
)
def test_a_bad_model_name_is_refused_with_the_fix(
    tmp_path: Path, model: str, expected: str
) -> None:
    code, message = invoke("rtb", "review", "--model", model, "--out", str(tmp_path / "r"))
    assert code == 2 and expected in message
    assert not (tmp_path / "r").exists()


def test_a_folder_holding_another_spec_is_refused(
    openai_server: OpenAIServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "spec.toml").write_text("# someone else's\n")
    code, message = invoke(
        "rtb", "review", "--model", "openai/x", "--base-url", openai_server.base_url,
        "--out", str(run),
    )  # fmt: skip
    assert code == 2 and "different spec" in message


def test_the_quick_path_grades_the_final_answer_after_the_reasoning() -> None:
    from trustbench.rtb.review._quick import QUICK

    spec = tomllib.loads(QUICK.spec_text("openai/m", base_url="http://127.0.0.1:9/v1"))
    assert spec["track_options"]["answer_extraction"] == "final_json_object"
