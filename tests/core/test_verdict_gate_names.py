"""Verdicts and `report --json` name failed gates as the spec declares them, never by metric."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from trustbench.core.figures import rate_figure
from trustbench.core.gates import GateResult, GateSpec, evaluate_gate
from trustbench.core.report import ReportPage, report_summary, subject_verdicts

FALSE_APPROVALS = "false_approval_rate"


def _gate(subject: str, name: str | None, threshold: float, comparison: Any = "<=") -> GateResult:
    """One gate evaluated for `subject` the way the report step does: named `<gate> (<subject>)`."""
    spec = GateSpec(name=name, metric=FALSE_APPROVALS, threshold=threshold, comparison=comparison)
    named = spec.model_copy(update={"name": f"{spec.label} ({subject})"})
    figure = rate_figure(FALSE_APPROVALS, 3, 20, description="false approvals / trials")
    result = evaluate_gate(named, [figure])
    return result.model_copy(update={"subject": subject, "reason": f"{subject}: {result.reason}"})


def _page(*gates: GateResult, instruments: tuple[str, ...] = ()) -> ReportPage:
    return ReportPage(
        title="t",
        gates=list(gates),
        subjects=["cand"],
        instruments=list(instruments),
        expected_to_fail=list(instruments),
    )


def test_a_blocked_verdict_names_the_declared_gate_not_its_metric() -> None:
    (verdict,) = subject_verdicts(_page(_gate("cand", "false-approvals", 0.05)))
    assert verdict.status == "blocked"
    assert verdict.headline == "blocked by gate false-approvals"


def test_two_gates_on_one_metric_are_told_apart_by_name() -> None:
    strict = _gate("cand", "strict-approvals", 0.05)
    loose = _gate("cand", "loose-approvals", 0.5)
    (verdict,) = subject_verdicts(_page(strict, loose))
    assert verdict.headline == "blocked by gate strict-approvals"
    assert "loose-approvals" not in verdict.headline


def test_two_unnamed_gates_on_one_metric_say_what_each_compares() -> None:
    estimate = _gate("cand", None, 0.05)
    strict = _gate("cand", None, 0.1, comparison="<")
    (verdict,) = subject_verdicts(_page(estimate, strict))
    assert verdict.headline == (
        f"blocked by gate {FALSE_APPROVALS} (estimate <= 0.05), {FALSE_APPROVALS} (estimate < 0.1)"
    )


def test_an_instrument_built_to_fail_names_its_gate() -> None:
    page = _page(_gate("sentinel", "false-approvals", 0.05), instruments=("sentinel",))
    verdict = next(v for v in subject_verdicts(page) if v.subject == "sentinel")
    assert verdict.headline == "failed as expected: false-approvals"


def test_the_json_summary_lists_failed_gates_by_declared_name() -> None:
    strict = _gate("cand", "strict-approvals", 0.05)
    loose = _gate("cand", "loose-approvals", 0.5)
    page = _page(strict, loose)
    result = SimpleNamespace(
        verdicts=subject_verdicts(page),
        gates=page.gates,
        record_path="r",
        html_path="h",
        complete=True,
        blocked=True,
    )
    summary = report_summary(result)
    assert summary["verdicts"]["cand"]["failed_gates"] == ["strict-approvals"]
    assert {g["name"]: g["status"] for g in summary["gates"]} == {
        "strict-approvals": "failed",
        "loose-approvals": "passed",
    }
