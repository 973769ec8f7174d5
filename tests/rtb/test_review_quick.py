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


def test_the_quick_options_reach_the_spec_it_freezes() -> None:
    from trustbench._quick_model import CallLimits
    from trustbench.rtb.review._quick import QUICK

    call = CallLimits(timeout_s=7.5, concurrency=1, max_tokens=64, extraction="any-value")
    data = tomllib.loads(QUICK.spec_text("openai/m", base_url="http://h/v1", call=call))
    assert (data["timeout_s"], data["concurrency"]) == (7.5, 1)
    assert data["candidates"][0]["settings"]["max_tokens"] == 64
    # The value set is the track's: the quick path passes the string through as given.
    assert data["track_options"]["answer_extraction"] == "any-value"
    assert "timeout" in data["retry"]["retry_on"]  # retried at the halved concurrency


def test_extraction_is_refused_on_the_workflow_track_which_reads_tool_calls() -> None:
    from trustbench._quick_model import CallLimits
    from trustbench.errors import InputError
    from trustbench.rtb.workflow._quick import QUICK

    with pytest.raises(InputError, match="applies to `rtb review`"):
        QUICK.spec_text("openai/m", call=CallLimits(extraction="fenced"))


@pytest.mark.parametrize(
    "value", ["sk-proj-4f9Qx2LmT8vB7nK3pZ1wY6cR", "a8F3kL9mQ2xZ7pV4tW1nB6yH5jD0sG3e"]
)
def test_a_key_pasted_into_api_key_env_is_refused_before_anything_is_written(
    tmp_path: Path, value: str
) -> None:
    run = tmp_path / "r"
    code, message = invoke(
        "rtb", "review", "--model", "openai/m", "--api-key-env", value, "--out", str(run)
    )
    assert code == 2 and "--api-key-env takes the NAME" in message
    assert value not in message and not run.exists()


@pytest.mark.parametrize(
    ("server", "port"), [("ollama", 11434), ("vllm", 8000), ("lmstudio", 1234)]
)
def test_a_local_server_named_as_provider_gets_the_openai_command(
    tmp_path: Path, server: str, port: int
) -> None:
    code, message = invoke(
        "rtb", "review", "--model", f"{server}/llama3", "--out", str(tmp_path / "r")
    )
    assert code == 2
    assert f"use --model openai/llama3 --base-url http://127.0.0.1:{port}/v1" in message


def test_a_failed_preflight_leaves_nothing_that_blocks_the_corrected_command(
    openai_server: OpenAIServer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The base URL lacks /v1: the server answers 404 at /chat/completions; the corrected
    # command reaches it (and is refused for its key, with a hint naming the variable).
    monkeypatch.setenv("LOCAL_KEY", "wrong")
    openai_server.script(
        lambda body, n: Behaviour("status", status=404 if n == 1 else 401, body="{}")
    )
    run = tmp_path / "run"
    args = ["rtb", "review", "--model", "openai/m", "--out", str(run), "--api-key-env", "LOCAL_KEY"]
    code, message = invoke(*args, "--base-url", openai_server.root_url)
    assert code == 2 and f"try {openai_server.root_url}/v1" in message
    assert not run.exists()
    code, message = invoke(*args, "--base-url", openai_server.base_url)
    assert code == 2 and "different spec" not in message
    assert "HTTP 401" in message and "$LOCAL_KEY" in message
    assert [r.path for r in openai_server.requests] == [
        "/chat/completions", "/v1/chat/completions",
    ]  # fmt: skip


def test_new_names_the_next_free_folder_and_never_an_earlier_run(tmp_path: Path) -> None:
    from trustbench._quick_model import quick_folder

    default = tmp_path / "runs" / "review-m"
    assert quick_folder(default, None, new=True) == default  # nothing there yet
    default.mkdir(parents=True)
    (default / "spec.toml").write_text("")
    assert quick_folder(default, None, new=False) == default  # rerun: resume or re-report
    assert quick_folder(default, None, new=True) == tmp_path / "runs" / "review-m-2"
    given = tmp_path / "mine"
    assert quick_folder(default, given, new=True) == given


def test_a_finished_folder_is_reported_again_saying_so_and_offering_new(tmp_path: Path) -> None:
    from trustbench._quick_model import finished_note

    run = tmp_path / "run"
    run.mkdir()
    assert finished_note(run) is None
    (run / "record.json").write_text('{"complete": false}')
    assert finished_note(run) is None  # a --limit run: the rerun goes on with it
    (run / "record.json").write_text('{"complete": true}')
    note = finished_note(run) or ""
    assert "already holds a finished run" in note and "nothing is sent" in note
    assert "--new" in note and str(tmp_path / "run-2") in note


def test_ctrl_c_during_the_quick_path_says_how_far_it_got_and_keeps_the_folder_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trustbench.core

    def interrupted_run(run_dir: Path, progress: Any, **_: Any) -> None:
        progress.start(480, 0)
        progress.update(3, 1, 0)
        raise KeyboardInterrupt

    monkeypatch.setattr(trustbench.core, "run_experiment", interrupted_run)
    monkeypatch.chdir(tmp_path)
    code, output = invoke(
        "rtb", "review", "--model", "openai/bot", "--base-url", "http://127.0.0.1:9/v1",
    )  # fmt: skip
    run = Path("runs") / "review-bot"
    assert code == 130, output
    assert "interrupted: 3/480 trials finished and recorded (1 failed); resume with: " in output
    assert f"(or trustbench run {run}, then trustbench report {run})" in output
    assert (tmp_path / run / "manifest.json").is_file()  # kept: the resume needs it


def test_a_refused_attempt_says_its_folder_was_removed_not_to_edit_the_spec_it_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command prints `spec: RUN/spec.toml (edit it and rerun ...)` before freezing; the
    # refusal that removes RUN again must say so, or a user goes looking for that file.
    monkeypatch.delenv("UNSET_KEY_FOR_THIS_TEST", raising=False)
    run = tmp_path / "run"
    code, message = invoke(
        "rtb", "review", "--model", "openai/m", "--base-url", "http://127.0.0.1:9/v1",
        "--api-key-env", "UNSET_KEY_FOR_THIS_TEST", "--out", str(run),
    )  # fmt: skip
    assert code == 2 and "UNSET_KEY_FOR_THIS_TEST" in message, message
    assert f"nothing was kept ({run} removed)" in message and not run.exists()
    assert "--allow-missing-keys" not in message  # a freeze flag: this command froze and ran


def test_a_refused_preflight_names_no_flag_of_a_run_folder_that_was_removed(
    tmp_path: Path,
) -> None:
    # `trustbench run --no-preflight` needs the folder this refusal removes: rerunning the
    # command with the server fixed is the way on.
    run = tmp_path / "run"
    code, message = invoke(
        "rtb", "review", "--model", "openai/m", "--base-url", "http://127.0.0.1:9/v1",
        "--out", str(run),
    )  # fmt: skip
    assert code == 2 and "preflight" in message, message
    assert f"nothing was kept ({run} removed)" in message and not run.exists()
    assert "--no-preflight" not in message
