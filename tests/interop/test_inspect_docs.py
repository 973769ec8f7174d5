"""The command lines of docs/inspect-interop.md, run verbatim, and the task on every shipped corpus.

The doc's `sh` block is run by bash in an empty folder, with only the two variables the doc
says to set (`OPENAI_API_KEY`, `OPENAI_BASE_URL`, pointing at the local OpenAI-compatible test
server, which answers each input with the reference policy's finding). Then the whole round
trip is checked: the decisions trustbench graded from the imported log are the ones the server
sent, and the log `export-inspect` wrote has scores, metrics and token usage in `inspect log
dump`'s JSON.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.support.child_env import child_env
from tests.support.openai_server import Behaviour, OpenAIServer, json_reply, reply
from tests.support.records import full_record

from trustbench.core import read_ledger
from trustbench.rtb.corpus import export_candidate_inputs, load_corpus
from trustbench.rtb.corpus._load import DEFAULT_VERSION, builtin_corpus_root
from trustbench.rtb.policy import parse_candidate_input, policy_of

inspect_ai = pytest.importorskip("inspect_ai", reason="needs the `inspect` extra")
pytest.importorskip("openai", reason="Inspect's openai/ provider needs the openai package")

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "inspect-interop.md"
SHIPPED = sorted(p.name.removeprefix("v") for p in builtin_corpus_root().parent.glob("v*.*"))
"""Every corpus version trustbench ships (`rtb/corpus/v*`)."""


def _doc_commands() -> str:
    blocks = re.findall(r"```sh\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert blocks, "docs/inspect-interop.md has no runnable (sh) block"
    return "\n".join(blocks)


def _environment(tmp: Path, **extra: str) -> dict[str, str]:
    """The test's own interpreter first on PATH; nothing of the user's (no proxy, no Inspect or
    OpenAI configuration)."""
    env = child_env(tmp, extra=extra)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    return env


class ReferenceServer:
    """Answers every input with its corpus policy's reference finding; records what it sent."""

    def __init__(self) -> None:
        self.decisions: dict[str, str] = {}

    def __call__(self, body: Any, number: int) -> Behaviour | None:
        prompt = body["messages"][0]["content"]
        visible = parse_candidate_input(body["messages"][-1]["content"])
        reviewers = policy_of(visible).reviewers
        reviewer = next(f(0) for n, f in reviewers.items() if n.startswith("reference-policy"))
        finding = json.loads(reviewer.review(prompt, visible) or "{}")
        self.decisions[visible.evaluation_id] = finding["decision"]
        return json_reply(finding)


def _bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.timeout(1200)  # every case of the default corpus through Inspect, import, report
def test_the_documented_round_trip_runs_verbatim_and_grades_what_the_server_sent(
    tmp_path: Path,
) -> None:
    server_script = ReferenceServer()
    with OpenAIServer() as server:
        server.script(server_script)
        env = _environment(
            tmp_path / "env",
            OPENAI_API_KEY="unused-by-the-local-server",
            OPENAI_BASE_URL=server.base_url,
        )
        done = _bash(_doc_commands(), tmp_path, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = full_record(tmp_path / "runs/from-inspect")
    rows = [r for r in record["review"]["trials"] if r["configuration"] == "openai:my-model"]
    graded = {r["evaluation_ids"][0]: r["outcome"] for r in rows}
    # The documented export is of the reviewer-side default corpus, found again by its hash.
    default = load_corpus(builtin_corpus_root(DEFAULT_VERSION))
    assert len(graded) == len(default.cases) and graded == server_script.decisions

    dump = json.loads((tmp_path / "dump.json").read_text())
    assert dump["eval"]["model"] == "openai/my-model"
    (score,) = dump["results"]["scores"]
    assert score["metrics"]["accuracy"]["value"] == 1.0  # every reference finding is supported
    assert "stderr" in score["metrics"] and "record.json" in score["metadata"]["note"]
    usage = dump["stats"]["model_usage"]["openai/my-model"]
    ledger = read_ledger(tmp_path / "runs/from-inspect")
    assert usage["input_tokens"] == sum(a["prompt_tokens"] for a in ledger.attempts) > 0
    sample = dump["samples"][0]
    assert sample["scores"]["trustbench"]["value"] == "C"
    assert sample["scores"]["trustbench"]["answer"] in {"permit", "deny", "hold"}
    assert sample["model_usage"]["openai/my-model"]["output_tokens"] > 0
    # The role Inspect sent the prompt under is recorded with each imported trial.
    roles = {tuple(t["outcome"]["inspect_wire_roles"]) for t in ledger.trials}
    assert roles <= {("system", "user"), ("developer", "user")} and len(roles) == 1


def test_a_relative_export_dir_that_names_nothing_fails_in_one_line_naming_the_path_tried(
    tmp_path: Path,
) -> None:
    line = next(x for x in _doc_commands().splitlines() if x.startswith("TASK="))
    script = (
        f'{line}\ninspect eval "$TASK@rtb_review" --model openai/m -M responses_api=false '
        "-T export_dir=no-such-export/"
    )
    # A wide "terminal", so the line is not wrapped by Inspect's console.
    env = _environment(tmp_path / "env", OPENAI_API_KEY="unused", COLUMNS="400")
    done = _bash(script, tmp_path, env)
    shown = [x for x in (done.stdout + done.stderr).splitlines() if x.strip()]
    assert done.returncode != 0
    assert shown == [
        f"rtb_review: -T export_dir: no such folder (tried {tmp_path.resolve() / 'no-such-export'})"
    ]


@pytest.mark.parametrize("version", SHIPPED)
def test_the_task_runs_and_imports_on_every_shipped_corpus(version: str, tmp_path: Path) -> None:
    from tests.support.cli import invoke

    from trustbench.core import report_run
    from trustbench.interop.inspect_task import rtb_review

    corpus = builtin_corpus_root(version)
    export_candidate_inputs(load_corpus(corpus), tmp_path / "export", seed=5)
    with OpenAIServer() as server, pytest.MonkeyPatch.context() as patch:
        server.script(lambda body, n: reply("not a finding") if n % 2 else reply(""))
        patch.setenv("OPENAI_API_KEY", "unused")
        [log] = inspect_ai.eval(
            # No corpus named: the task finds the shipped corpus the export was made from.
            rtb_review(export_dir=str(tmp_path / "export")),
            model="openai/m",
            model_base_url=server.base_url,
            model_args={"responses_api": False},
            limit=4,
            log_dir=str(tmp_path / "logs"),
            display="none",
            max_retries=0,
        )
    assert log.status == "success", log.error
    code, output = invoke(
        "import-inspect", log.location, "--export", str(tmp_path / "export"),
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert code == 0, output
    report_run(tmp_path / "run")
    record = full_record(tmp_path / "run")
    graded = {
        r["evaluation_ids"][0]: r["outcome"]
        for r in record["review"]["trials"]
        if r["configuration"] == "openai:m" and r["outcome"] != "not_run"
    }
    answers = {str(s.id): s.scores["rtb_review_scorer"].answer for s in log.samples or []}
    assert graded == answers and set(graded.values()) == {"invalid", "missing"}
