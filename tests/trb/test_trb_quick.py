"""`trustbench trb run --model openai/NAME`: a chat model added to TRB's default spec, against the
local OpenAI-compatible test server. The spec it froze is written into the run folder and reruns
as written; exit codes as `report`'s (4 incomplete with --limit); a --base-url server gets no key.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import invoke
from tests.support.openai_server import Behaviour, OpenAIServer, probe_reply
from tests.trb.test_trb_profile_track import _governed
from tests.trb.test_trb_track import write_spec
from typer.testing import CliRunner

from trustbench.cli import app
from trustbench.core import load_spec
from trustbench.trb._quick import trb_quick_spec_text
from trustbench.trb.corpus import Trace, generate_split, write_corpus
from trustbench.trb.corpus._format import HumanCollection


def _tiny_spec(tmp_path: Path) -> Path:
    """A built-in-corpus spec small enough to run in seconds (one oracle, Tracks 1 and 3)."""
    return write_spec(
        tmp_path / "base",
        {"governed": "oracle:perfectly-governed"},
        sizes="{ train = 20, eval = 2, transfer = 1 }",
        options='measures = ["governance", "attribution"]\nsplits = ["eval"]',
    )


def _script(body: Any, number: int) -> Behaviour | None:
    return probe_reply(body) or _governed(body, number)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[OpenAIServer]:
    monkeypatch.setenv("TRUSTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAIServer() as running:
        running.script(_script)
        yield running


def test_the_model_is_added_as_a_chat_candidate_and_its_written_spec_reruns(
    server: OpenAIServer, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    code, output = invoke(
        "trb", "run", "--spec", str(_tiny_spec(tmp_path)), "--model", "openai/gov-bot",
        "--base-url", server.base_url, "--out", str(run), "--quiet",
    )  # fmt: skip
    spec = run / "spec.toml"
    # Reported either way: two traces may not establish trust (the implicit gate then fails).
    assert code == 0 or (code == 1 and "TRB verdict (gov-bot)" in output), output
    data = tomllib.loads(spec.read_text())
    *_, candidate = data["candidates"]
    # No api_key_env: a --base-url server gets no key.
    expected = {"name": "gov-bot", "kind": "openai_chat", "model": "gov-bot"}
    assert candidate == {**expected, "base_url": server.base_url}
    assert {c["name"] for c in data["candidates"]} == {"governed", "gov-bot"}
    record = json.loads((run / "record.json").read_text())
    assert record["trb"]["adapters"]["gov-bot"]["tier"] == "proxy"
    assert record["trb"]["profile"]["gov-bot"]["G"]["status"] == "measured"
    assert record["verdicts"]["gov-bot"]["status"] in ("passed", "blocked")
    models = {r.body["model"] for r in server.requests if r.path.endswith("completions")}
    assert models == {"gov-bot"}
    assert all("authorization" not in r.headers for r in server.requests)
    # The written spec is an ordinary spec: it runs again as it stands.
    again = invoke("trb", "run", "--spec", str(spec), "--out", str(tmp_path / "again"), "--quiet")
    assert again[0] == code, again[1]


def _run_quick(server: OpenAIServer, spec: Path, run: Path) -> tuple[int, str, dict[str, Any]]:
    """`trb run --model` as `invoke` runs it, keeping what it printed before a failed gate."""
    result = CliRunner().invoke(app, [
        "trb", "run", "--spec", str(spec), "--model", "openai/gov-bot",
        "--base-url", server.base_url, "--out", str(run), "--quiet",
    ])  # fmt: skip
    code = getattr(result.exception, "exit_code", result.exit_code)
    return code, result.output, json.loads((run / "record.json").read_text())


def test_the_quick_path_never_prints_trustworthy_underpowered_and_prints_the_records_line(
    server: OpenAIServer, tmp_path: Path
) -> None:
    # A chat model that follows every edit, on two reference-world traces: synthetic data and
    # intervals too wide to decide most bars, so never "trustworthy", whatever else it shows.
    code, output, record = _run_quick(server, _tiny_spec(tmp_path), tmp_path / "run")
    verdict = record["trb"]["verdicts"]["gov-bot"]
    assert verdict["verdict"] != "trustworthy", verdict["line"]
    assert any(b["status"] == "not established" for b in verdict["pass_bars"])
    assert code == 1 and record["verdicts"]["gov-bot"]["status"] != "passed"
    assert "trustworthy" not in output.replace("not trustworthy", ""), output
    # one source: the gate line printed is the verdict line record.json holds
    assert f"TRB verdict (gov-bot): {verdict['line']}" in output


def _one_human_answer_corpus(folder: Path) -> Path:
    """An exported collection with one human answer and no Track 3 label (issue 53's repro)."""
    traces = generate_split("eval", 2, seed=2)
    at = next(i for i, step in enumerate(traces[0].steps) if step.counterfactuals)
    edit = traces[0].steps[at].counterfactuals[0]
    answer = HumanCollection(
        protocol_sha256="0" * 64, sessions=("p01@00000000",), participants=("p01",),
        answers=1, r_prime_origin=edit.provenance,
    )  # fmt: skip
    human = edit.model_copy(
        update={"provenance": "paired_session", "continuation_source": "human",
                "collected": answer}
    )  # fmt: skip

    def keep_only(trace: Trace, kept: tuple[Any, ...]) -> Trace:
        steps = tuple(
            s.model_copy(update={"counterfactuals": kept if i == at else ()})
            for i, s in enumerate(trace.steps)
        )
        return trace.model_copy(update={"steps": steps})

    eval_split = [keep_only(traces[0], (human,)), keep_only(traces[1], ())]
    write_corpus(folder, {"eval": eval_split}, kind="human_paired")
    return folder


def test_one_collected_human_answer_without_track_3_labels_prints_not_a_trb_score(
    server: OpenAIServer, tmp_path: Path
) -> None:
    corpus = _one_human_answer_corpus(tmp_path / "corpus")
    spec = tmp_path / "spec.toml"
    spec.write_text(
        'suite = "trb"\ntrack = "profile"\nconcurrency = 1\n'
        f'[corpus]\npath = "{corpus}"\n[analysis]\nbootstrap_resamples = 200\n'
        '[track_options]\nmeasures = ["governance", "attribution"]\nsplits = ["eval"]\n'
        '[[candidates]]\nname = "governed"\nkind = "inprocess"\n'
        'model = "oracle:perfectly-governed"\n'
    )
    code, output, record = _run_quick(server, spec, tmp_path / "run")
    expected = "not a TRB score: Track 1 has 1 human items, Track 3 has 0"
    assert expected in output, output
    assert record["trb"]["trb_score"]["is_score"] is False
    assert expected in record["trb"]["verdicts"]["gov-bot"]["line"]
    assert any(q.startswith(f"N{expected[1:]}") for q in record["qualifications"])
    assert code == 1 and record["trb"]["verdicts"]["gov-bot"]["verdict"] != "trustworthy"


def test_limit_runs_a_few_trials_and_exits_4_for_the_incomplete_run(
    server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["trb", "run", "--spec", str(_tiny_spec(tmp_path)), "--model", "openai/gov-bot"]
    args += ["--base-url", server.base_url, "--limit", "1", "--quiet"]
    code, output = invoke(*args)
    assert code == 4, output
    run = tmp_path / "runs" / "trb-gov-bot"
    assert f"spec: {Path('runs') / 'trb-gov-bot' / 'spec.toml'}" in output
    record = json.loads((run / "record.json").read_text())
    assert record["complete"] is False
    assert all(v["status"] in ("incomplete", "not_run") for v in record["verdicts"].values())
    # The same command resumes the same folder (same spec) and runs one more trial.
    assert invoke(*args)[0] in (0, 1, 4)
    assert json.loads((run / "record.json").read_text())["finished_trials"] == 2


def test_the_default_spec_is_the_smoke_spec_with_the_model_as_its_last_candidate(
    tmp_path: Path,
) -> None:
    text = trb_quick_spec_text("openai/gpt-4o-mini")
    path = tmp_path / "spec.toml"
    path.write_text(text)
    spec = load_spec(path)
    names = [c.name for c in spec.candidates]
    assert names[:2] == ["trace-ai-full", "trace-ai-ablation"] and names[-1] == "gpt-4o-mini"
    *_, chat = tomllib.loads(text)["candidates"]
    # No server or key written: the SDK defaults apply ($OPENAI_BASE_URL, OPENAI_API_KEY).
    assert chat == {"name": "gpt-4o-mini", "kind": "openai_chat", "model": "gpt-4o-mini"}
    assert spec.track_options["max_traces"] == 40  # the smoke spec's sizes, unchanged


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--model", "anthropic/claude"], "OpenAI chat API only"),
        (["--model", "opnai/x"], "did you mean 'openai'?"),
        (["--model", "gpt-4o"], "must be PROVIDER/NAME"),
        (["--base-url", "http://127.0.0.1:9"], "only go with --model"),
        (["--timeout", "5"], "only go with --model"),
        (["--model", "ollama/llama3"], "openai/llama3 --base-url http://127.0.0.1:11434/v1"),
        (["--model", "openai/x", "--api-key-env", "sk-4f9Qx2LmT8vB7nK3pZ1w"], "not the key"),
        ([], "name the run folder with --out"),
    ],
)
def test_bad_model_options_are_refused_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    code, message = invoke("trb", "run", *args)
    assert code == 2 and expected in message, message
    assert not (tmp_path / "runs").exists()


def test_timeout_and_concurrency_set_the_copied_specs_top_level_keys(tmp_path: Path) -> None:
    from trustbench._quick_model import CallLimits
    from trustbench.trb._quick import QuickOptions, spec_and_folder

    quick = QuickOptions("openai/m", call=CallLimits(timeout_s=300.0, concurrency=2))
    written, folder, made_here = spec_and_folder("smoke", tmp_path / "run", quick)
    assert made_here and folder == tmp_path / "run"
    data = tomllib.loads(written.read_text())
    assert (data["timeout_s"], data["concurrency"]) == (300.0, 2)  # smoke says concurrency = 1
    assert data["track"] == "profile" and data["candidates"][-1]["model"] == "m"


def test_max_tokens_sets_the_models_settings_and_goes_only_with_model(tmp_path: Path) -> None:
    # The format failure's fix is "raise the candidate's settings.max_tokens": the quick path
    # takes it as the reviewer's does, and an act call still sets its own limit.
    from trustbench._quick_model import CallLimits
    from trustbench.trb._quick import QuickOptions, spec_and_folder

    quick = QuickOptions("openai/m", call=CallLimits(max_tokens=2048))
    written, _, _ = spec_and_folder("smoke", tmp_path / "run", quick)
    *_, candidate = tomllib.loads(written.read_text())["candidates"]
    assert candidate["settings"] == {"max_tokens": 2048}
    code, message = invoke("trb", "run", "--max-tokens", "64", "--out", str(tmp_path / "x"))
    assert code == 2 and "--max-tokens" in message and "--model" in message, message
