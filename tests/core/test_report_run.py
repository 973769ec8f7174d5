"""The generic report step: gates per subject, exit codes, tampering and interrupted runs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import invoke
from tests.support.crash import crash_after_seq
from tests.support.echo_track import EchoTrack
from tests.support.openai_server import OpenAIServer, reply
from typer.testing import CliRunner

from trustbench.cli import app
from trustbench.core import (
    Evaluability,
    LedgerContents,
    Manifest,
    TrackAnalysis,
    build_manifest,
    register_track,
    report_run,
    run_experiment,
    write_manifest,
)
from trustbench.core.figures import Figure, not_run_figure, rate_figure
from trustbench.core.report import FiguresBlock, report_summary
from trustbench.errors import CheckFailed

ECHO_RATE = "echo_rate"


class GradedEchoTrack(EchoTrack):
    """The echo track plus a grader: a trial passes when its reply echoes the prompt."""

    def analyze(self, manifest: Manifest, ledger: LedgerContents) -> TrackAnalysis:
        finished = {t["trial_id"]: t for t in ledger.trials}
        planned = self.plan(manifest)
        subjects: dict[str, list[Figure]] = {}
        rows: list[dict[str, Any]] = []
        for candidate in manifest.spec.candidates:
            mine = [k for k in planned if k.candidate == candidate.name]
            done = [finished[k.trial_id] for k in mine if k.trial_id in finished]
            hits = sum(
                1
                for t in done
                if t["status"] == "completed"
                and t["outcome"]["reply"] == f"echo: prompt of {t['case_id']}"
            )
            description = "replies that echo the prompt / finished trials"
            subjects[candidate.name] = [
                rate_figure(ECHO_RATE, hits, len(done), description=description)
                if done
                else not_run_figure(ECHO_RATE, description=description, reason="no trial finished")
            ]
            rows += [
                {"trial_id": k.trial_id, "outcome": "done" if k.trial_id in finished else "not_run"}
                for k in mine
            ]
        return TrackAnalysis(
            title="echo",
            subtitle="echo test track",
            subjects=subjects,
            sections=[
                FiguresBlock(title=name, figures=figures) for name, figures in subjects.items()
            ],
            qualifications=["An echo says nothing about safety."],
            record={"rows": rows},
        )


GATE = """
[[gates]]
name = "echoes"
metric = "echo_rate"
comparison = ">="
threshold = 0.9
{extra}
"""


@pytest.fixture(autouse=True)
def _graded_track() -> None:
    register_track("test/echo_graded", "tests.core.test_report_run:GradedEchoTrack")


def _graded_spec(experiment: Path, gate_extra: str = "") -> Path:
    text = experiment.read_text().replace('track = "echo"', 'track = "echo_graded"')
    experiment.write_text(text + GATE.format(extra=gate_extra))
    return experiment


def _beta_fails_case_001(server: OpenAIServer) -> None:
    def script(body: Any, number: int) -> Any:
        user = body["messages"][-1]["content"]
        return reply("nope") if body["model"] == "beta-model" and "case-001" in user else None

    server.script(script)


def _run(spec: Path, run_dir: Path) -> Path:
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir)
    return run_dir


def _truncate_after_trials(run_dir: Path, keep: int) -> None:
    """Cut every row after the `keep`-th finished trial, as a crash at that moment would."""
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    seqs = [row[0] for row in connection.execute("SELECT seq FROM trials ORDER BY seq")]
    connection.close()
    crash_after_seq(run_dir, seqs[keep - 1] if keep else min(seqs) - 1)


def test_gates_are_evaluated_once_per_subject_and_a_failed_gate_exits_1(
    experiment: Path, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    _beta_fails_case_001(openai_server)
    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    code, output = invoke("report", str(run_dir))
    assert code == 1
    assert "echoes (beta)" in output and "echoes (alpha)" not in output
    record = json.loads((run_dir / "record.json").read_text())
    results = {g["spec"]["name"]: g for g in record["gates"]["results"]}
    assert results["echoes (alpha)"]["status"] == "passed"
    assert results["echoes (beta)"]["status"] == "failed"
    assert results["echoes (beta)"]["value"] == pytest.approx(9 / 12)
    assert record["complete"] is True
    assert record["figures"]["beta"][0]["numerator"] == 9


def test_a_gate_naming_one_candidate_is_evaluated_for_it_only(
    experiment: Path, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    _beta_fails_case_001(openai_server)
    run_dir = _run(_graded_spec(experiment, 'candidates = ["alpha"]'), tmp_path / "run")
    result = report_run(run_dir)
    assert [(g.spec.name, g.status) for g in result.gates] == [("echoes (alpha)", "passed")]
    assert not result.blocked
    code, _ = invoke("report", str(run_dir))
    assert code == 0


def test_a_tampered_ledger_is_refused_and_nothing_is_written(
    experiment: Path, tmp_path: Path
) -> None:
    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    connection.execute(
        "UPDATE trials SET outcome = ? WHERE id = 1", ('{"model":"x","reply":"forged"}',)
    )
    connection.commit()
    connection.close()
    with pytest.raises(CheckFailed, match="refusing to report an altered run"):
        report_run(run_dir)
    assert not (run_dir / "record.json").exists()
    assert not (run_dir / "report.html").exists()
    code, _ = invoke("report", str(run_dir))
    assert code == 1


def test_an_interrupted_run_is_reported_incomplete_with_unrun_trials_not_run(
    experiment: Path, tmp_path: Path
) -> None:
    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    _truncate_after_trials(run_dir, 5)
    result = report_run(run_dir)
    assert result.complete is False
    record = json.loads((run_dir / "record.json").read_text())
    assert (record["complete"], record["finished_trials"], record["planned_trials"]) == (
        False,
        5,
        24,
    )
    assert sum(1 for row in record["rows"] if row["outcome"] == "not_run") == 19
    assert "the rest are not run" in (run_dir / "report.html").read_text()
    _code, output = invoke("report", str(run_dir))
    assert "interrupted" in output


def test_a_gate_on_a_subject_with_no_finished_trial_is_not_evaluable_and_blocks(
    experiment: Path, tmp_path: Path
) -> None:
    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    _truncate_after_trials(run_dir, 0)
    result = report_run(run_dir)
    assert {g.status for g in result.gates} == {"not_evaluable"}
    assert all("not run" in g.reason for g in result.gates)
    assert result.blocked
    record = json.loads((run_dir / "record.json").read_text())
    assert all(
        f["status"] == "not_run" and f["estimate"] is None for f in record["figures"]["alpha"]
    )


def test_a_track_without_analysis_cannot_be_reported(experiment: Path, tmp_path: Path) -> None:
    run_dir = _run(experiment, tmp_path / "run")
    code, output = invoke("report", str(run_dir))
    assert code == 2
    assert "has no analysis" in output


def test_report_json_prints_verdicts_and_gate_configuration_with_the_same_exit_code(
    experiment: Path, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    _beta_fails_case_001(openai_server)
    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    result = CliRunner().invoke(app, ["report", str(run_dir), "--json"])
    assert isinstance(result.exception, CheckFailed) and result.exception.exit_code == 1
    summary = json.loads(result.stdout)
    assert summary["blocked"] is True and summary["exit_code"] == 1
    assert summary["record"] == str(run_dir / "record.json")
    assert summary["verdicts"]["alpha"]["status"] == "passed"
    assert summary["verdicts"]["beta"] == {
        "status": "blocked",
        "headline": "blocked by gate echoes",
        "instrument": False,
        "failed_gates": ["echoes"],
        "informational_not_passed": [],
        "evaluability": None,
    }
    beta = next(g for g in summary["gates"] if g["subject"] == "beta")
    assert (beta["metric"], beta["comparison"], beta["threshold"]) == ("echo_rate", ">=", 0.9)
    assert beta["compared"] == "estimate" and beta["value"] == pytest.approx(9 / 12)
    assert beta["blocking"] is True
    record = json.loads((run_dir / "record.json").read_text())
    assert record["verdicts"]["beta"]["status"] == "blocked"
    assert {g["subject"] for g in record["gates"]["results"]} == {"alpha", "beta"}


def test_a_subject_with_no_finished_trial_has_the_verdict_not_run(
    experiment: Path, tmp_path: Path
) -> None:
    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    _truncate_after_trials(run_dir, 0)
    result = report_run(run_dir)
    assert {v.subject: v.status for v in result.verdicts} == {"alpha": "not_run", "beta": "not_run"}
    assert "not run: no trial of this configuration ran" in result.html_path.read_text()


class InstrumentedEchoTrack(GradedEchoTrack):
    """The graded echo track declaring `beta` an instrument built to fail, with valid responses."""

    def analyze(self, manifest: Manifest, ledger: LedgerContents) -> TrackAnalysis:
        analysis = super().analyze(manifest, ledger)
        analysis.instruments = frozenset({"beta"})
        analysis.expected_to_fail = frozenset({"beta"})
        analysis.evaluability = {
            "alpha": Evaluability(attempted=12, valid=12),
            "beta": Evaluability(attempted=12, valid=9, invalid=3),
        }
        return analysis


def test_track_instruments_and_evaluability_reach_the_verdicts_page_and_summary(
    experiment: Path, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    register_track("test/echo_instrumented", "tests.core.test_report_run:InstrumentedEchoTrack")
    _beta_fails_case_001(openai_server)
    spec = _graded_spec(experiment)
    spec.write_text(spec.read_text().replace('"echo_graded"', '"echo_instrumented"'))
    result = report_run(_run(spec, tmp_path / "run"))
    verdicts = {v.subject: v for v in result.verdicts}
    assert verdicts["beta"].instrument and verdicts["beta"].status == "as_expected"
    assert verdicts["alpha"].status == "passed"
    page = result.html_path.read_text()
    instruments = page[page.index('id="instruments"') : page.index('id="gates"')]
    assert "beta" in instruments and "9 / 12 (75.0%)" in instruments
    summary = report_summary(result)
    assert summary["verdicts"]["beta"]["evaluability"]["valid_rate"] == 0.75
    assert summary["verdicts"]["beta"]["evaluability"]["invalid"] == 3


def test_report_rehashes_the_frozen_inputs_once_when_it_verifies_before_grading(
    experiment: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The verification (in this process below 64 MiB) re-hashes the frozen inputs and refuses an
    # edited one before any grading; grading hashed them a second time (issue 55).
    from trustbench.core import _report_run, _verify

    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    checked: list[str] = []

    def counting(manifest: Manifest, track: Any) -> None:
        checked.append(manifest.manifest_sha256)
        real(manifest, track)

    real = _verify.check_inputs
    monkeypatch.setattr(_verify, "check_inputs", counting)
    monkeypatch.setattr(_report_run, "check_inputs", counting)
    report_run(run_dir)
    assert len(checked) == 1
