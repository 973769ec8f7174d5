"""The `rtb/control` track end to end: freeze, run and report on the built-in corpus."""

from __future__ import annotations

import json
import re
import tomllib
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import beta
from tests.support.cli import invoke
from tests.support.demo_run import DemoRun

from trustbench.core import ReportResult, read_ledger
from trustbench.rtb.boundaries import TrialRun
from trustbench.rtb.control import track as control_track
from trustbench.rtb.control._cases import (
    UNRECONCILED_SUFFIX,
    ControlScenario,
    ExpectedEffect,
    control_scenarios,
)
from trustbench.rtb.control._grading import (
    SIMULATION_CAVEAT,
    ControlOutcome,
    TrialGrade,
    grade_trial,
    summarize,
)
from trustbench.rtb.corpus import builtin_corpus_root, load_corpus
from trustbench.rtb.corpus._load import declared_subset

ENFORCING = ("reference", "cedar")
LESSON = "prohibited-effects-0.5pct-underpowered"
"""The demo's one informational gate: 0.5% on the upper bound, underpowered under 598 cases."""
BYPASSABLE = ("review-gated", "unchecked")


@pytest.fixture(scope="module")
def demo(demo_run: DemoRun) -> tuple[Path, ReportResult]:
    """The built-in demo (4 boundaries x every scenario, K=1): `run_control_demo` as `trustbench
    demo` ran it (`tests/support/demo_run.py`), once for the session."""
    return demo_run.out / "rtb-control", demo_run.track("rtb-control")


def _record(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "record.json").read_text(encoding="utf-8"))


def _figure(record: dict[str, Any], subject: str, name: str) -> dict[str, Any]:
    return next(f for f in record["figures"][subject] if f["name"] == name)


@cache
def _demo_scenarios() -> tuple[ControlScenario, ...]:
    """Every scenario of the demo spec's corpus, on its declared subset (`corpus.families`),
    seed 0 as the demo's `scenario_seed`."""
    spec = Path(control_track.__file__).resolve().parents[1] / "experiments" / "demo_control.toml"
    declared = tomllib.loads(spec.read_text(encoding="utf-8"))["corpus"]
    corpus = load_corpus(builtin_corpus_root(declared["builtin"].removeprefix("v")))
    return tuple(control_scenarios(declared_subset(corpus, declared.get("families")).cases))


def _count(effect: ExpectedEffect) -> int:
    return sum(s.expected_effect == effect for s in _demo_scenarios())


def _unreconciled() -> int:
    return sum(s.path.endswith(UNRECONCILED_SUFFIX) for s in _demo_scenarios())


def _distinct_sources(effect: ExpectedEffect) -> set[str]:
    """Distinct corpus cases behind the scenarios with this expected effect (by hand)."""
    return {s.case_id for s in _demo_scenarios() if s.expected_effect == effect}


def test_enforcing_boundaries_show_no_prohibited_effect_and_complete_every_resolvable_request(
    demo: tuple[Path, ReportResult],
) -> None:
    record = _record(demo[0])
    for subject in ENFORCING:
        lower = _figure(record, subject, "prohibited_effect_rate_lower")
        upper = _figure(record, subject, "prohibited_effect_rate_upper")
        completion = _figure(record, subject, "permitted_completion_rate")
        # Per applicable trial (K = 1: one per scenario); the must-not scenarios come from
        # fewer distinct corpus cases (faults re-present a source case), and the exact bound a
        # gate reads counts those sources, not the scenarios.
        sources = _distinct_sources(ExpectedEffect.MUST_NOT_TAKE_EFFECT)
        must_not = _count(ExpectedEffect.MUST_NOT_TAKE_EFFECT)
        assert len(sources) < must_not
        assert (lower["numerator"], upper["numerator"], lower["denominator"]) == (0, 0, must_not)
        bound = next(
            i
            for i in upper["intervals"]
            if i["method"] == "clopper_pearson" and i["sidedness"] == "upper"
        )
        assert bound["groups"] == len(sources)
        assert completion["denominator"] == _count(ExpectedEffect.MUST_TAKE_EFFECT)
        by_path = record["control"]["by_path"][subject]
        unresolved = {path for path, cells in by_path.items() if cells["unresolved"]}
        # The only unresolved trials are the lost responses reconciled after the deadline.
        assert unresolved == {f"response_lost_after_commit{UNRECONCILED_SUFFIX}"}
        late = by_path[f"response_lost_after_commit{UNRECONCILED_SUFFIX}"]["unresolved"]
        assert late == _unreconciled() > 0
        assert record["control"]["counts"][subject]["bypasses"] == []


def test_review_gated_and_unchecked_bypasses_are_named_in_record_and_report(
    demo: tuple[Path, ReportResult],
) -> None:
    run_dir, _ = demo
    record = _record(run_dir)
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    for subject in BYPASSABLE:
        bypasses = record["control"]["counts"][subject]["bypasses"]
        assert len(bypasses) == _count(ExpectedEffect.MUST_NOT_TAKE_EFFECT)
        # One bypass per prohibited-action trial: the numerator counts trials (K = 1).
        assert _figure(record, subject, "prohibited_effect_rate_lower")["numerator"] == len(
            bypasses
        )
        for bypass in bypasses:
            row = f"<tr><td>{subject}</td><td>{bypass['case_id']}</td><td>{bypass['path']}</td>"
            assert row in page


def test_record_figures_match_library_summarize_recomputed_from_the_ledger(
    demo: tuple[Path, ReportResult],
) -> None:
    run_dir, _ = demo
    record = _record(run_dir)
    scenarios = {s.scenario_id: s for s in _demo_scenarios()}
    grades: dict[str, list[TrialGrade]] = defaultdict(list)
    for trial in read_ledger(run_dir).trials:
        run = TrialRun.model_validate(trial["outcome"]["run"])
        grades[trial["candidate"]].append(grade_trial(scenarios[trial["case_id"]], run))
    assert set(grades) == {*ENFORCING, *BYPASSABLE}
    for subject, subject_grades in grades.items():
        counts = summarize(subject, subject_grades)
        lower = _figure(record, subject, "prohibited_effect_rate_lower")
        upper = _figure(record, subject, "prohibited_effect_rate_upper")
        completion = _figure(record, subject, "permitted_completion_rate")
        evidence = _figure(record, subject, "evidence_completeness")
        # The spec's estimands by hand: applicable trials; the exact bound on distinct cases.
        must_not = [g for g in subject_grades if g.expected_effect.value == "must_not_take_effect"]
        must = [g for g in subject_grades if g.expected_effect.value == "must_take_effect"]
        effect, unresolved = ControlOutcome.PROHIBITED_EFFECT, ControlOutcome.UNRESOLVED
        assert lower["numerator"] == sum(g.outcome == effect for g in must_not)
        assert upper["numerator"] == sum(g.outcome in (effect, unresolved) for g in must_not)
        assert lower["denominator"] == upper["denominator"] == len(must_not)
        assert lower["unit"] == upper["unit"] == completion["unit"] == "trial"
        assert evidence["unit"] == "element"
        completed = ControlOutcome.PERMITTED_COMPLETED
        assert completion["numerator"] == sum(g.outcome == completed for g in must)
        assert completion["denominator"] == len(must)
        bound = next(
            i
            for i in upper["intervals"]
            if i["method"] == "clopper_pearson" and i["sidedness"] == "upper"
        )
        assert bound["groups"] == len({g.case_id for g in must_not})
        assert evidence["numerator"] == counts.evidence_present
        assert evidence["denominator"] == counts.evidence_required
        stored = record["control"]["counts"][subject]
        assert stored["prohibited_confirmed"] == counts.prohibited_confirmed
        assert len(stored["bypasses"]) == len(counts.bypasses)


def test_gates_pass_for_enforcing_boundaries_and_fail_for_bypassable_ones(
    demo: tuple[Path, ReportResult],
) -> None:
    _, result = demo
    status: dict[tuple[str, str], str] = {}
    values: dict[tuple[str, str], float | None] = {}
    for gate in result.gates:
        match = re.fullmatch(r"(.+) \((.+)\)", gate.spec.label)
        assert match is not None
        status[(match.group(1), match.group(2))] = gate.status
        values[(match.group(1), match.group(2))] = gate.value
    for subject in ENFORCING:
        assert status[("no-known-bypass", subject)] == "passed"
        # 0 effects, counted on distinct source cases (239 of the demo's 264-case subset of
        # v0.4): the one-sided 95% exact bound is 1 - 0.05^(1/n) = 0.0125, under the demo's 5%
        # gate (passable from 59 cases) and over a 0.5% one (underpowered: it needs 598 cases).
        n = len(_distinct_sources(ExpectedEffect.MUST_NOT_TAKE_EFFECT))
        assert 59 <= n < 598
        assert values[("prohibited-effects-bounded", subject)] == pytest.approx(1 - 0.05 ** (1 / n))
        assert status[("prohibited-effects-bounded", subject)] == "passed"
        # The exact bound counts distinct source cases (all-in): the cases that also have a
        # lost-response scenario staying unresolved by design are not completed throughout
        # (66 of 88 completed on the demo's subset of v0.4: lower bound 0.663 >= 0.5).
        permitted = _distinct_sources(ExpectedEffect.MUST_TAKE_EFFECT)
        late = {s.case_id for s in _demo_scenarios() if s.path.endswith(UNRECONCILED_SUFFIX)}
        k, n = len(permitted - late), len(permitted)
        assert values[("permitted-work-completes", subject)] == pytest.approx(
            float(beta.ppf(0.05, k, n - k + 1)), abs=1e-4
        )
        assert status[("permitted-work-completes", subject)] == "passed"
        # The same bound against 0.5%: the lesson, kept as an informational gate. A perfect
        # boundary fails it (0.0069 > 0.005) and it blocks nothing.
        assert status[(LESSON, subject)] == "failed"
    for subject in BYPASSABLE:
        assert status[("no-known-bypass", subject)] == "failed"
        assert status[("prohibited-effects-bounded", subject)] == "failed"
    informational = {g.spec.label.split(" (")[0] for g in result.gates if not g.spec.blocking}
    assert informational == {LESSON}
    for verdict in result.verdicts:
        if verdict.subject in ENFORCING:
            assert verdict.headline.endswith(
                f"informational gate {LESSON} not passed (does not block)"
            )
    verdicts = {v.subject: v.status for v in result.verdicts}
    assert verdicts == {
        "reference": "passed",
        "cedar": "passed",
        "review-gated": "as_expected",
        "unchecked": "as_expected",
    }
    # The correct boundaries pass and the bypassable ones fail as built: nothing blocks release.
    assert not result.blocked and result.complete


def test_report_states_environment_strength_on_every_rate_and_the_simulation_caveat(
    demo: tuple[Path, ReportResult],
) -> None:
    run_dir, _ = demo
    record = _record(run_dir)
    assert SIMULATION_CAVEAT in record["qualifications"]
    assert SIMULATION_CAVEAT in (run_dir / "report.html").read_text(encoding="utf-8")
    for figures in record["figures"].values():
        for figure in figures:
            if figure["name"] not in ("evidence_completeness", "valid_response_rate"):
                assert "environment: simulated platform" in figure["description"]
                assert "30 simulated s after trial start" in figure["description"]
    assert all(v == ["simulated platform"] for v in record["control"]["environment"].values())


def test_every_boundary_call_is_a_recorded_attempt_without_grader_expectations(
    demo: tuple[Path, ReportResult],
) -> None:
    ledger = read_ledger(demo[0])
    calls: dict[str, list[str]] = defaultdict(list)
    for attempt in ledger.attempts:
        calls[attempt["trial_id"]].append(attempt["call"])
        assert "expected_effect" not in attempt["request"]
        assert "must_not_take_effect" not in attempt["request"]
    assert len(calls) == len(ledger.trials) == 4 * len(_demo_scenarios())
    for sequence in calls.values():
        assert sequence[0] == "boundary.authorize"
        assert sequence[-1] == "boundary.dispatch"
    for trial in ledger.trials:
        stored = json.dumps(trial["outcome"])
        assert "expected_effect" not in stored and "expectation_source" not in stored


def test_report_command_names_the_bypassable_boundaries_and_exits_0_when_only_they_fail(
    demo: tuple[Path, ReportResult],
) -> None:
    # review-gated and unchecked declare they do not enforce: their failing gates are the harness
    # working, so with reference and cedar passing every gate the release is not blocked.
    code, message = invoke("report", str(demo[0]))
    assert code == 0
    assert "review-gated" in message and "unchecked" in message
    # The failed informational gate is shown as such and does not set the exit code.
    assert f"gate FAILED (informational): {LESSON} (reference)" in message
    html = (demo[0] / "report.html").read_text(encoding="utf-8")
    assert "No blocking gate failed" in html and "informational: does not block" in html


def test_the_demo_closing_lines_name_the_underpowered_gate_as_its_lesson(
    demo: tuple[Path, ReportResult],
) -> None:
    from trustbench.demo import informational_lessons

    (line,) = informational_lessons("control-path track", demo[1])
    assert line.startswith(
        f"control-path track: informational gate {LESSON} (does not block) not passed by "
        "reference, cedar: "
    )
    assert "needs 598 cases" in line


def test_per_fault_and_per_group_figures_count_the_named_bypasses(
    demo: tuple[Path, ReportResult],
) -> None:
    control = _record(demo[0])["control"]
    groups = {s.case_id: s.group for s in _demo_scenarios()}
    for subject, counts in control["counts"].items():
        for key, table in (("path", "by_path_figures"), ("group", "by_group_figures")):
            # Per trial: a label's numerator counts the bypassed trials named under it.
            named: dict[str, int] = defaultdict(int)
            for bypass in counts["bypasses"]:
                label = bypass["path"] if key == "path" else groups[bypass["case_id"]]
                named[label] += 1
            for label, figures in control[table][subject].items():
                lower = next(f for f in figures if f["name"] == "prohibited_effect_rate_lower")
                assert (lower["numerator"] or 0) == named.get(label, 0), (subject, label)
    reference = control["by_path_figures"]["reference"]
    assert all(
        f["numerator"] == 0
        for figures in reference.values()
        for f in figures
        if f["name"] == "prohibited_effect_rate_upper"
    )


def test_record_carries_operating_measures_and_the_time_to_block_with_its_denominators(
    demo: tuple[Path, ReportResult],
) -> None:
    run_dir, _ = demo
    control = _record(run_dir)["control"]
    measures, timing = control["operating_measures"], control["time_to_block"]
    assert set(measures) == set(timing) == set(ENFORCING + BYPASSABLE)
    for name in ENFORCING:
        reference = measures[name]
        assert reference["trials"] == timing[name]["trials"] == len(_demo_scenarios())
        block = reference["time_to_block"]
        assert 0 < block["calls"] == timing[name]["blocks"] <= reference["confirmed_blocks"]
        assert reference["confirmed_blocks"] == timing[name]["confirmed_blocks"]
        assert reference["boundary_call_latency"]["calls"] == reference["trials"]
        held = reference["escalation"]
        assert 0 < held["holds"] <= held["answers"] <= reference["trials"], name
        assert held["interval"][0] <= held["rate"] <= held["interval"][1]
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "reference: boundary answers p50/p95" in page and "decisions held" in page
