"""Informational gates (`blocking = false`): reported like any gate, never a release decision.

An informational gate may fail without blocking release or setting the exit code; it must never
make a failing or unreadable candidate look good: verdicts and release read blocking gates only.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from tests.support.cli import invoke
from tests.support.openai_server import OpenAIServer, reply

from trustbench.core import build_manifest, register_track, run_experiment, write_manifest
from trustbench.core.figures import Figure, not_run_figure, rate_figure
from trustbench.core.gates import GateResult, GateSpec, any_failed, evaluate_gate
from trustbench.core.report import (
    ReportPage,
    release_blocked,
    render_report_html,
    report_summary,
    subject_verdicts,
)

RATE = "false_approval_rate"


def _gate(
    subject: str, name: str, threshold: float, figure: Figure, *, blocking: bool = True
) -> GateResult:
    """One gate evaluated for `subject` as the report step does (named `<gate> (<subject>)`)."""
    spec = GateSpec(
        name=f"{name} ({subject})",
        metric=figure.name,
        threshold=threshold,
        comparison="<=" if figure.name == RATE else ">=",
        blocking=blocking,
    )
    result = evaluate_gate(spec, [figure])
    return result.model_copy(update={"subject": subject, "reason": f"{subject}: {result.reason}"})


def _three_of_twenty() -> Figure:
    return rate_figure(RATE, 3, 20, description="false approvals / trials")


def _judge(*gates: GateResult) -> tuple[Any, bool]:
    page = ReportPage(title="t", gates=list(gates), subjects=["cand"])
    verdicts = subject_verdicts(page)
    return {v.subject: v for v in verdicts}["cand"], release_blocked(page.gates, verdicts)


def test_a_failed_informational_gate_neither_blocks_nor_turns_the_verdict() -> None:
    loose = _gate("cand", "loose", 0.5, _three_of_twenty())
    lesson = _gate("cand", "lesson", 0.05, _three_of_twenty(), blocking=False)
    assert (loose.status, lesson.status) == ("passed", "failed")
    assert not lesson.blocks and not any_failed([loose, lesson])
    verdict, blocked = _judge(loose, lesson)
    assert verdict.status == "passed" and not blocked
    assert verdict.headline == (
        "passed all 1 blocking gate(s); informational gate lesson not passed (does not block)"
    )


def test_the_same_gate_declared_blocking_blocks() -> None:
    loose = _gate("cand", "loose", 0.5, _three_of_twenty())
    strict = _gate("cand", "strict", 0.05, _three_of_twenty())
    verdict, blocked = _judge(loose, strict)
    assert verdict.status == "blocked" and blocked and any_failed([loose, strict])


def test_a_failing_candidate_stays_blocked_whatever_its_informational_gates_read() -> None:
    strict = _gate("cand", "strict", 0.05, _three_of_twenty())
    lesson = _gate("cand", "lesson", 0.5, _three_of_twenty(), blocking=False)
    assert lesson.status == "passed"
    verdict, blocked = _judge(strict, lesson)
    assert verdict.status == "blocked" and blocked
    assert verdict.headline == "blocked by gate strict"


def test_a_not_evaluable_candidate_is_still_blocked_by_its_blocking_gates() -> None:
    # A dead endpoint: the implicit evaluability gate fails, the declared gate cannot be read.
    answered = rate_figure("valid_response_rate", 0, 20, description="valid responses")
    evaluability = _gate("cand", "evaluability", 0.95, answered)
    unread = _gate("cand", "bypass", 0.0, not_run_figure(RATE, description="d", reason="dead"))
    lesson = _gate("cand", "lesson", 0.5, _three_of_twenty(), blocking=False)
    assert (evaluability.status, unread.status) == ("failed", "not_evaluable")
    verdict, blocked = _judge(evaluability, unread, lesson)
    assert verdict.status == "not_evaluable" and blocked
    verdict, blocked = _judge(unread, lesson)  # no implicit gate: the unread one still blocks
    assert verdict.status == "not_evaluable" and blocked


def test_a_subject_held_only_to_informational_gates_is_not_a_pass() -> None:
    lesson = _gate("cand", "lesson", 0.5, _three_of_twenty(), blocking=False)
    verdict, blocked = _judge(lesson)
    assert verdict.status == "no_gates" and not blocked
    unread = _gate(
        "cand", "lesson", 0.5, not_run_figure(RATE, description="d", reason="x"), blocking=False
    )
    verdict, blocked = _judge(unread)
    assert verdict.status == "no_gates" and "does not block" in verdict.headline


def test_an_instrument_failing_only_an_informational_gate_is_a_harness_problem() -> None:
    loose = _gate("sentinel", "loose", 0.5, _three_of_twenty())
    lesson = _gate("sentinel", "lesson", 0.05, _three_of_twenty(), blocking=False)
    page = ReportPage(
        title="t",
        gates=[loose, lesson],
        subjects=["sentinel"],
        instruments=["sentinel"],
        expected_to_fail=["sentinel"],
    )
    verdicts = subject_verdicts(page)
    assert verdicts[0].status == "harness_problem" and release_blocked(page.gates, verdicts)


def test_json_and_html_mark_the_informational_gate() -> None:
    loose = _gate("cand", "loose", 0.5, _three_of_twenty())
    lesson = _gate("cand", "lesson", 0.05, _three_of_twenty(), blocking=False)
    page = ReportPage(title="t", gates=[loose, lesson], subjects=["cand"])
    verdicts = subject_verdicts(page)
    summary = report_summary(
        SimpleNamespace(
            verdicts=verdicts,
            gates=page.gates,
            record_path="r",
            html_path="h",
            complete=True,
            blocked=release_blocked(page.gates, verdicts),
        )
    )
    assert {g["name"]: g["blocking"] for g in summary["gates"]} == {"loose": True, "lesson": False}
    assert summary["verdicts"]["cand"]["failed_gates"] == []
    assert summary["verdicts"]["cand"]["informational_not_passed"] == ["lesson"]
    assert (summary["blocked"], summary["exit_code"]) == (False, 0)
    html = render_report_html(page)
    assert "informational: does not block" in html
    assert "No blocking gate failed" in html and "Release blocked" not in html


# End to end through freeze, run and `trustbench report`, on the graded echo track.

GATES = """
[[gates]]
name = "echoes"
metric = "echo_rate"
comparison = ">="
threshold = 0.5

[[gates]]
name = "echoes-strict"
metric = "echo_rate"
comparison = ">="
threshold = 0.9
blocking = {blocking}
description = "informational on purpose"
"""


@pytest.fixture(autouse=True)
def _graded_track() -> None:
    register_track("test/echo_graded", "tests.core.test_report_run:GradedEchoTrack")


def _spec(experiment: Path, server: OpenAIServer, *, blocking: bool) -> Path:
    """beta misses case-001 (9 of 12 echoes): it passes `echoes`, fails `echoes-strict`."""

    def script(body: Any, number: int) -> Any:
        user = body["messages"][-1]["content"]
        return reply("nope") if body["model"] == "beta-model" and "case-001" in user else None

    server.script(script)
    text = experiment.read_text().replace('track = "echo"', 'track = "echo_graded"')
    experiment.write_text(text + GATES.format(blocking=str(blocking).lower()))
    return experiment


def test_the_blocking_field_is_frozen_into_the_manifest_hash(
    experiment: Path, openai_server: OpenAIServer
) -> None:
    spec = _spec(experiment, openai_server, blocking=False)
    informational = build_manifest(spec)
    assert [g.blocking for g in informational.spec.gates] == [True, False]
    spec.write_text(spec.read_text().replace("blocking = false", "blocking = true"))
    assert build_manifest(spec).manifest_sha256 != informational.manifest_sha256


def test_report_exits_0_on_a_failed_informational_gate_and_1_when_it_is_blocking(
    experiment: Path, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    spec = _spec(experiment, openai_server, blocking=False)
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir)
    code, output = invoke("report", str(run_dir))
    assert code == 0, output
    assert "gate FAILED (informational): echoes-strict (beta)" in output
    code, output = invoke("report", str(run_dir), "--json")
    summary = json.loads(output)
    assert (code, summary["exit_code"], summary["blocked"]) == (0, 0, False)
    assert summary["verdicts"]["beta"]["status"] == "passed"
    assert "informational gate echoes-strict not passed" in summary["verdicts"]["beta"]["headline"]

    spec.write_text(spec.read_text().replace("blocking = false", "blocking = true"))
    blocking_run = tmp_path / "blocking"
    write_manifest(build_manifest(spec), blocking_run)
    run_experiment(blocking_run)
    code, message = invoke("report", str(blocking_run))
    assert code == 1 and "echoes-strict (beta)" in message


def test_an_incomplete_run_exits_4_whatever_its_gates_declare(
    experiment: Path, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    from tests.support.crash import crash_after_seq

    spec = _spec(experiment, openai_server, blocking=False)
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir)
    crash_after_seq(run_dir, 3)
    code, _ = invoke("report", str(run_dir))
    assert code == 4
