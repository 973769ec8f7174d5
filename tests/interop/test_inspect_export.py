"""`export-inspect`: a run's ledger as Inspect eval logs that `read_eval_log` reads back whole."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.rtb.test_review_track import run_spec, spec_text
from tests.support.cli import invoke
from tests.support.openai_server import (
    Behaviour,
    OpenAIServer,
    json_reply,
    openai_server,  # noqa: F401
    probe_reply,
    reply,
    server_error,
)
from tests.support.records import full_record

from trustbench.core import read_ledger, report_run
from trustbench.rtb.corpus import CandidateInput
from trustbench.rtb.policy.narrow_v1 import ReferencePolicyReviewer

inspect_log = pytest.importorskip("inspect_ai.log", reason="needs the `inspect` extra")

LLM = """[[candidates]]
name = "llm"
kind = "openai_chat"
model = "test-reviewer-1"
base_url = "{base_url}"
"""
RETRY = """
[retry]
transport_max_retries = 1
backoff_base_s = 0.001
backoff_max_s = 0.002
"""


class FlakyReviewer:
    """A 500 on the first call for every third case, then the policy's reply; prose otherwise."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.order: list[str] = []

    def __call__(self, body: Any, number: int) -> Behaviour | None:
        if (probe := probe_reply(body)) is not None:
            return probe
        visible = CandidateInput.model_validate_json(body["messages"][-1]["content"])
        eid = visible.evaluation_id
        if eid not in self.calls:
            self.order.append(eid)
        self.calls[eid] += 1
        position = self.order.index(eid)
        if position % 3 == 0 and self.calls[eid] == 1:
            return server_error(500)
        if position % 3 == 1:
            return reply("approve")
        good = ReferencePolicyReviewer().review(body["messages"][0]["content"], visible)
        return json_reply(json.loads(good or "{}"))


@pytest.fixture
def reported(tmp_path: Path, openai_server: OpenAIServer) -> Path:  # noqa: F811
    openai_server.script(FlakyReviewer())
    text = spec_text(LLM.format(base_url=openai_server.base_url)).replace(
        "[corpus]", RETRY + "\n[corpus]"
    )
    run_dir = run_spec(tmp_path, text)
    report_run(run_dir)
    return run_dir


def test_every_trial_is_a_sample_scored_with_the_trustbench_grade(
    reported: Path, tmp_path: Path
) -> None:
    code, output = invoke("export-inspect", str(reported), "--out", str(tmp_path / "logs"))
    assert code == 0, output
    log = inspect_log.read_eval_log(str(tmp_path / "logs" / "llm.eval"))
    ledger = read_ledger(reported)
    record = full_record(reported)
    assert len(log.samples) == len(ledger.trials) == 12
    rows = [r for r in record["review"]["trials"] if r["configuration"] == "llm"]
    grades = {(r["case_id"], r["trial"]): (r["supported"], r["outcome"]) for r in rows}
    scores = {
        (s.metadata["case_id"], s.epoch - 1): (
            s.scores["trustbench"].value == "C",
            s.scores["trustbench"].answer,
        )
        for s in log.samples
    }
    assert scores == grades
    assert Counter(answer for _, answer in scores.values())["invalid"] == 4
    assert {s.scores["trustbench"].value for s in log.samples} <= {"C", "I"}
    assert log.eval.metadata["manifest_sha256"] == record["manifest_sha256"]


def test_the_header_has_inspects_accuracy_and_stderr_beside_a_note_on_the_record(
    reported: Path, tmp_path: Path
) -> None:
    invoke("export-inspect", str(reported), "--out", str(tmp_path / "logs"))
    log = inspect_log.read_eval_log(str(tmp_path / "logs" / "llm.eval"))
    values = [s.scores["trustbench"].value == "C" for s in log.samples]
    (score,) = log.results.scores
    assert score.metrics["accuracy"].value == pytest.approx(sum(values) / len(values))
    mean = sum(values) / len(values)
    spread = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
    assert score.metrics["stderr"].value == pytest.approx(spread / len(values) ** 0.5)
    assert "record.json" in score.metadata["note"] and "record.json" in log.results.metadata["note"]


def test_models_are_named_the_inspect_way_and_tokens_are_counted_per_sample_and_log(
    reported: Path, tmp_path: Path
) -> None:
    invoke("export-inspect", str(reported), "--out", str(tmp_path / "logs"))
    log = inspect_log.read_eval_log(str(tmp_path / "logs" / "llm.eval"))
    ledger = read_ledger(reported)
    model = f"openai/{ledger.attempts[0]['requested_model']}"
    assert log.eval.model == model
    per_sample = 0
    for sample in log.samples:
        attempts = ledger.attempts_of(sample.id)
        usage = sample.model_usage[model]
        assert usage.input_tokens == sum(a["prompt_tokens"] or 0 for a in attempts) > 0
        assert usage.output_tokens == sum(a["completion_tokens"] or 0 for a in attempts) > 0
        events = [e for e in sample.events if e.event == "model"]
        assert [e.output.usage.input_tokens if e.output.usage else None for e in events] == [
            a["prompt_tokens"] for a in attempts
        ]
        per_sample += usage.total_tokens
    total = sum((a["prompt_tokens"] or 0) + (a["completion_tokens"] or 0) for a in ledger.attempts)
    assert log.stats.model_usage[model].total_tokens == per_sample == total


def test_transport_retries_are_visible_as_separate_model_events(
    reported: Path, tmp_path: Path
) -> None:
    invoke("export-inspect", str(reported), "--out", str(tmp_path / "logs"))
    log = inspect_log.read_eval_log(str(tmp_path / "logs" / "llm.eval"))
    retried = [s for s in log.samples if s.metadata["transport_retries"]]
    assert len(retried) == 4
    for sample in retried:
        first, second = [e for e in sample.events if e.event == "model"]
        assert first.error and first.metadata["http_status"] == 500
        assert second.error is None and sample.output.completion


def test_an_altered_ledger_is_not_exported(reported: Path, tmp_path: Path) -> None:
    with sqlite3.connect(reported / "ledger.sqlite") as connection:
        connection.execute("UPDATE trials SET status = 'completed' WHERE id = 1")
        connection.execute("UPDATE trials SET error = 'edited' WHERE id = 1")
    code, message = invoke("export-inspect", str(reported), "--out", str(tmp_path / "logs"))
    assert code == 1 and "refusing to export an altered run" in message
    assert not (tmp_path / "logs").exists()


def test_without_a_report_every_sample_is_not_graded_never_a_pass(
    reported: Path, tmp_path: Path
) -> None:
    for name in ("record.json", "report.html", "record.intoto.json"):
        (reported / name).unlink()
    invoke("export-inspect", str(reported), "--out", str(tmp_path / "logs"))
    log = inspect_log.read_eval_log(str(tmp_path / "logs" / "llm.eval"))
    assert {s.scores["trustbench"].value for s in log.samples} == {"I"}
    assert {s.scores["trustbench"].answer for s in log.samples} == {"not_graded"}


def test_a_failed_trial_is_exported_as_a_sample_with_its_error(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    first: list[str] = []

    def always_failing_first_case(body: Any, number: int) -> Behaviour | None:
        if (probe := probe_reply(body)) is not None:
            return probe
        eid = CandidateInput.model_validate_json(body["messages"][-1]["content"]).evaluation_id
        first.append(first[0] if first else eid)
        return server_error(500) if eid == first[0] else reply("approve")

    openai_server.script(always_failing_first_case)
    run_dir = run_spec(tmp_path, spec_text(LLM.format(base_url=openai_server.base_url)))
    report_run(run_dir)
    code, output = invoke("export-inspect", str(run_dir), "--out", str(tmp_path / "logs"))
    assert code == 0, output
    log = inspect_log.read_eval_log(str(tmp_path / "logs" / "llm.eval"))
    failed = [s for s in log.samples if s.error is not None]
    assert len(failed) == 1 and failed[0].metadata["error_class"] == "server_error"


def test_a_limit_run_is_exported_incomplete_as_its_record_would_say(tmp_path: Path) -> None:
    from tests.rtb.test_review_track import inprocess, small_corpus

    from trustbench.core import build_manifest, run_experiment, write_manifest

    small_corpus(tmp_path / "corpus")
    (tmp_path / "spec.toml").write_text(spec_text(inprocess("ref", "reference-policy")))
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(tmp_path / "spec.toml"), run_dir)
    run_experiment(run_dir, limit=2)  # verifies clean, but 2 of the plan's trials only
    code, output = invoke("export-inspect", str(run_dir), "--out", str(tmp_path / "logs"))
    assert code == 0, output
    log = inspect_log.read_eval_log(str(tmp_path / "logs" / "ref.eval"))
    assert log.status != "success" and log.eval.metadata["complete"] is False
