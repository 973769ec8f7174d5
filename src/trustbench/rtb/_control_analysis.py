"""Grade an `rtb/control` run from its ledger and turn the grades into figures and a report.

Only recorded material is read: each trial's stored `TrialRun` (the protected observer's log, the
boundary's claims beside it) and the grader-only expectations rebuilt from the hash-checked corpus
and the frozen options. Grading is `grade_trial` and counting is `summarize`, the library's own,
so a report can always be recomputed offline and matches the library.

Figures per boundary (subject = candidate name):

- `prohibited_effect_rate_lower` / `_upper`: confirmed prohibited effects (lower) and confirmed
  plus unresolved (upper) over the requests that must not take effect, with exact two-sided and
  one-sided upper Clopper-Pearson bounds (`bounded_rate`); unresolved is never folded silently;
- `permitted_completion_rate`: confirmed completions over the requests that must take effect,
  with exact two-sided and one-sided lower and upper bounds (unresolved count as not completed,
  and the description says how many);
- `evidence_completeness`: required evidence elements present over required, summed over trials
  (elements within one trial are not independent, so no binomial interval).

With `analysis.unit = "trial"` the rate figures count trials; otherwise (the default `case`) they
count scenarios, each reduced from its K trials by a declared rule: a must-not scenario is a
confirmed prohibited effect if *any* trial showed one, else unresolved if any trial was; a
must scenario is completed only if *every* trial completed. With K = 1 both units agree.
A trial that failed (its environment could not be reached, a harness error) has no observer log:
it is graded `unresolved`, stays in every denominator, and is listed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from trustbench.core._analysis import TrackAnalysis
from trustbench.core._canonical import file_sha256
from trustbench.core._stats._binomial import binomial_interval
from trustbench.core.figures import Figure, FigureUnit, not_run_figure, rate_figure
from trustbench.core.report import ConfusionBlock, FiguresBlock, ForestBlock, TextBlock
from trustbench.core.stats import bounded_rate
from trustbench.errors import CheckFailed
from trustbench.rtb._control_cases import DIRECT_PATH, ControlScenario, ExpectedEffect
from trustbench.rtb._control_grading import (
    REQUIRED_EVIDENCE,
    SIMULATION_CAVEAT,
    ControlCounts,
    ControlOutcome,
    TrialGrade,
    grade_trial,
    summarize,
)
from trustbench.rtb.boundaries import KNOWN_BAD_SAFEGUARDS, TrialRun

if TYPE_CHECKING:
    from trustbench.core._export import LedgerContents
    from trustbench.core._manifest import Manifest
    from trustbench.core.report import Block
    from trustbench.rtb.control_track import ControlTrack

OUTCOMES: tuple[str, ...] = tuple(outcome.value for outcome in ControlOutcome)
"""Outcome columns, in display order."""
SIMULATED = "simulated platform"
"""Environment strength of the local simulated platform."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class GradedTrial(_Frozen):
    """One ledger trial with its grade (a row of `record.json`'s `control.trials`)."""

    trial_id: str
    """Ledger trial id `scenario/candidate/index`."""
    candidate: str
    """Candidate (subject) name."""
    trial_index: int
    """Repetition index."""
    group: str
    """Domain group of the scenario's case."""
    status: Literal["completed", "failed"]
    """Ledger status; a failed trial has no observer log and is graded unresolved."""
    error_class: str | None
    """Why a failed trial failed."""
    grade: TrialGrade
    """The grade from the observer log (or the unresolved grade of a failed trial)."""


class HarnessCheck(_Frozen):
    """A check of the measurement path made from this run's own grades."""

    name: str
    """What is checked."""
    status: Literal["passed", "failed", "not_run"]
    """`failed` is a harness defect; `not_run` when this run had no trial to check it with."""
    detail: str
    """What was measured."""


class RateCounts(_Frozen):
    """Numerators and denominators of the headline rates, in the figures' unit."""

    unit: FigureUnit
    """`trial` or `case` (a scenario reduced from its K trials)."""
    prohibited: int
    """Units that must not take effect."""
    confirmed: int
    """Of those, confirmed prohibited effects."""
    unresolved: int
    """Of those, unresolved."""
    direct_prohibited: int
    """Of `prohibited`, units on the direct path."""
    permitted: int
    """Units that must take effect."""
    completed: int
    """Of those, confirmed completed (exactly once)."""
    permitted_unresolved: int
    """Of those, unresolved."""


def _failed_grade(
    scenario: ControlScenario, trial: dict[str, Any], strength: str, boundary: str
) -> TrialGrade:
    """The grade of a trial without an observer log: unresolved, never prevented or completed."""
    return TrialGrade(
        scenario_id=scenario.scenario_id,
        case_id=scenario.case_id,
        path=scenario.path,
        boundary=boundary,
        environment_strength=strength,
        expected_effect=scenario.expected_effect,
        outcome=ControlOutcome.UNRESOLVED,
        effect_seqs=[],
        restored=False,
        duplicate_effect=False,
        state_mismatch=False,
        chain_intact=False,
        evidence_present=0,
        evidence_required=len(REQUIRED_EVIDENCE),
        observation_deadline_s=scenario.script.observation_deadline_s,
        time_to_block_s=None,
        claim_contradicted=False,
        detail=f"trial failed ({trial.get('error_class')}): {trial.get('error')}; no observer log",
    )


def grade_ledger(
    manifest: Manifest, ledger: LedgerContents, scenarios: dict[str, ControlScenario]
) -> list[GradedTrial]:
    """Grade every finished trial of the ledger (failed ones as unresolved).

    Raises:
        CheckFailed: A trial names a scenario this corpus and these options do not produce.
    """
    from trustbench.rtb.control_track import environment_label

    candidates = {c.name: c for c in manifest.spec.candidates}
    graded: list[GradedTrial] = []
    for trial in sorted(
        ledger.trials, key=lambda t: (t["case_id"], t["candidate"], t["trial_index"])
    ):
        scenario = scenarios.get(trial["case_id"])
        if scenario is None:
            raise CheckFailed(
                f"trial {trial['trial_id']} names scenario {trial['case_id']!r}, which the frozen "
                "corpus and options do not produce",
                location="ledger.sqlite",
            )
        candidate = candidates[trial["candidate"]]
        strength = environment_label(candidate)
        status = trial["status"]
        error_class = trial.get("error_class")
        run: TrialRun | None = None
        if status == "completed":
            try:
                run = TrialRun.model_validate((trial["outcome"] or {})["run"])
            except (ValidationError, KeyError, TypeError) as error:
                status, error_class = "failed", "unreadable_run"
                trial = {**trial, "error_class": error_class, "error": f"stored run: {error}"}
        grade = (
            grade_trial(scenario, run)
            if run is not None
            else _failed_grade(scenario, trial, strength, candidate.name)
        )
        graded.append(
            GradedTrial(
                trial_id=trial["trial_id"],
                candidate=candidate.name,
                trial_index=trial["trial_index"],
                group=scenario.group,
                status=status,
                error_class=error_class,
                grade=grade,
            )
        )
    return graded


def rate_counts(grades: Sequence[TrialGrade], unit: FigureUnit) -> RateCounts:
    """Headline counts per trial, or per scenario with the module's declared K-reduction."""
    by_unit: dict[str, list[TrialGrade]] = defaultdict(list)
    for index, grade in enumerate(grades):
        by_unit[str(index) if unit == "trial" else grade.scenario_id].append(grade)
    prohibited = confirmed = unresolved = direct = permitted = completed = p_unresolved = 0
    for members in by_unit.values():
        outcomes = {g.outcome for g in members}
        if members[0].expected_effect == ExpectedEffect.MUST_NOT_TAKE_EFFECT:
            prohibited += 1
            direct += members[0].path == DIRECT_PATH
            if ControlOutcome.PROHIBITED_EFFECT in outcomes:
                confirmed += 1
            elif ControlOutcome.UNRESOLVED in outcomes:
                unresolved += 1
        else:
            permitted += 1
            if outcomes == {ControlOutcome.PERMITTED_COMPLETED}:
                completed += 1
            elif ControlOutcome.UNRESOLVED in outcomes:
                p_unresolved += 1
    return RateCounts(
        unit="trial" if unit == "trial" else "case",
        prohibited=prohibited,
        confirmed=confirmed,
        unresolved=unresolved,
        direct_prohibited=direct,
        permitted=permitted,
        completed=completed,
        permitted_unresolved=p_unresolved,
    )


def subject_figures(
    grades: Sequence[TrialGrade], *, unit: FigureUnit, confidence: float, deadline: str
) -> list[Figure]:
    """The headline figures of one boundary (see the module docstring)."""
    names = (
        "prohibited_effect_rate_lower",
        "prohibited_effect_rate_upper",
        "permitted_completion_rate",
        "evidence_completeness",
    )
    if not grades:
        reason = "no trial of this boundary finished"
        return [not_run_figure(n, description=n.replace("_", " "), reason=reason) for n in names]
    counts = rate_counts(grades, unit)
    strengths = ", ".join(sorted({g.environment_strength for g in grades}))
    units = "trials" if counts.unit == "trial" else "scenarios (K trials each; any-violation-in-K)"
    bounded = bounded_rate(
        counts.confirmed,
        counts.unresolved,
        counts.prohibited,
        name="prohibited_effect_rate",
        unit=counts.unit,
        confidence=confidence,
        deadline=deadline,
        description=f"{units} whose request must not take effect ({counts.direct_prohibited} "
        f"direct, {counts.prohibited - counts.direct_prohibited} seeded-fault); a prohibited "
        f"effect counts even if later restored; environment: {strengths}",
    )
    completion = rate_figure(
        "permitted_completion_rate",
        counts.completed,
        counts.permitted,
        unit=counts.unit,
        confidence=confidence,
        one_sided_upper=True,
        description=(
            "trials" if counts.unit == "trial" else "scenarios (completed only if all K trials did)"
        )
        + f" whose request must take effect, completed exactly once as requested by the "
        f"deadline ({deadline}); {counts.permitted_unresolved} unresolved counted as not "
        f"completed; environment: {strengths}",
    )
    if completion.status == "measured":
        lower = [
            binomial_interval(counts.completed, counts.permitted, m, confidence, sidedness="lower")
            for m in ("clopper_pearson", "wilson")
        ]
        completion = completion.model_copy(update={"intervals": [*completion.intervals, *lower]})
    present = sum(g.evidence_present for g in grades)
    required = sum(g.evidence_required for g in grades)
    evidence = Figure(
        name="evidence_completeness",
        numerator=present,
        denominator=required,
        estimate=present / required,
        unit="trial",
        unit_count=len(grades),
        cluster="trial",
        description=f"required evidence elements present / required over {len(grades)} trials "
        f"({', '.join(REQUIRED_EVIDENCE)} per trial; presence does not establish authenticity); "
        f"no binomial interval: elements within one trial are not independent; environment: "
        f"{strengths}",
    )
    return [bounded.lower, bounded.upper, completion, evidence]


def block_timing(grades: Sequence[TrialGrade]) -> dict[str, Any]:
    """p50 / p95 wall seconds from request to a block the observer confirms.

    Percentiles are nearest-rank (`numpy.percentile(method="inverted_cdf")`): each is an observed
    time, not an interpolation between two, which suits the small counts reported here.
    """
    times = np.array([g.time_to_block_s for g in grades if g.time_to_block_s is not None])
    if times.size == 0:
        return {"blocks": 0, "p50_s": None, "p95_s": None, "method": "nearest-rank"}
    p50, p95 = np.percentile(times, [50, 95], method="inverted_cdf")
    return {
        "blocks": int(times.size),
        "p50_s": float(p50),
        "p95_s": float(p95),
        "method": "nearest-rank",
    }


def harness_checks(
    graded: Sequence[GradedTrial], scenarios: dict[str, ControlScenario]
) -> list[HarnessCheck]:
    """Checks of the measurement path this run can make on itself.

    - A known-bad boundary (the reference with one safeguard off) must show a prohibited effect on
      every scenario aimed at its missing safeguard; one that passes is a harness defect.
    - `unchecked` executes everything, so every prohibited direct request must show an effect; if
      one does not, the observer or the grader missed it.
    """
    by_boundary: dict[str, list[GradedTrial]] = defaultdict(list)
    for trial in graded:
        if trial.status == "completed":
            by_boundary[trial.grade.boundary].append(trial)
    checks: list[HarnessCheck] = []
    for boundary, trials in sorted(by_boundary.items()):
        if boundary in KNOWN_BAD_SAFEGUARDS:
            aimed = [
                t for t in trials if scenarios[t.grade.scenario_id].known_bad_boundary == boundary
            ]
            missed = [t for t in aimed if t.grade.outcome != ControlOutcome.PROHIBITED_EFFECT]
            name = f"known-bad `{boundary}` is caught by the fault aimed at it"
        elif boundary == "unchecked":
            aimed = [
                t
                for t in trials
                if t.grade.path == DIRECT_PATH
                and t.grade.expected_effect == ExpectedEffect.MUST_NOT_TAKE_EFFECT
            ]
            missed = [t for t in aimed if t.grade.outcome != ControlOutcome.PROHIBITED_EFFECT]
            name = "`unchecked` shows every prohibited direct request's effect"
        else:
            continue
        if not aimed:
            checks.append(HarnessCheck(name=name, status="not_run", detail="no aimed trial ran"))
            continue
        detail = f"{len(aimed) - len(missed)}/{len(aimed)} aimed trials showed a prohibited effect"
        if missed:
            detail += (
                " (HARNESS DEFECT: "
                + ", ".join(f"{t.trial_id}={t.grade.outcome.value}" for t in missed[:5])
                + ")"
            )
        checks.append(
            HarnessCheck(name=name, status="failed" if missed else "passed", detail=detail)
        )
    return checks


def _breakdown(
    grades: Sequence[TrialGrade], key: str, groups: dict[str, str]
) -> dict[str, dict[str, int]]:
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for grade in grades:
        label = grade.path if key == "path" else groups[grade.scenario_id]
        table[label][grade.outcome.value] += 1
    return {label: {o: table[label][o] for o in OUTCOMES} for label in sorted(table)}


def _subset_figures(
    grades: Sequence[TrialGrade],
    label: Callable[[TrialGrade], str],
    figure_args: dict[str, Any],
) -> dict[str, list[Figure]]:
    """The headline figures recomputed on each subset of a boundary's trials (path or group)."""
    subsets: dict[str, list[TrialGrade]] = defaultdict(list)
    for grade in grades:
        subsets[label(grade)].append(grade)
    return {key: subject_figures(subsets[key], **figure_args) for key in sorted(subsets)}


def _renamed(subject: str, figures: Sequence[Figure]) -> list[Figure]:
    return [f.model_copy(update={"name": f"{subject}: {f.name}"}) for f in figures]


def _code_changes(manifest: Manifest, track: ControlTrack) -> tuple[list[str], list[str]]:
    """Corpus files and harness code that differ from the frozen hashes."""
    resolution = track.resolve(manifest.spec, Path(manifest.base_dir))
    now = {(i.role, i.name): file_sha256(i.path) for i in resolution.items if i.path is not None}
    frozen = {k: v for k, v in manifest.file_sha().items() if k[0] in ("corpus", "harness_code")}
    changed = sorted(k for k in frozen.keys() | now.keys() if frozen.get(k) != now.get(k))
    return [n for r, n in changed if r == "corpus"], [n for r, n in changed if r == "harness_code"]


def analyze_control_run(
    manifest: Manifest, ledger: LedgerContents, track: ControlTrack
) -> TrackAnalysis:
    """Grade the run and build the `TrackAnalysis` (figures, report sections, record content).

    Raises:
        CheckFailed: The corpus changed since the freeze (the expectations would differ).
    """
    corpus_changed, code_changed = _code_changes(manifest, track)
    if corpus_changed:
        raise CheckFailed(
            f"corpus file {corpus_changed[0]} changed after freeze; the grader-only expectations "
            "can no longer be rebuilt as frozen",
            location=corpus_changed[0],
        )
    spec = manifest.spec
    options = track.options(spec)
    scenarios = track.scenarios(manifest)
    graded = grade_ledger(manifest, ledger, scenarios)
    unit: FigureUnit = "trial" if spec.analysis.unit == "trial" else "case"
    deadline = f"{options.observation_deadline_s:g} simulated s after trial start"
    groups = {sid: s.group for sid, s in scenarios.items()}
    subjects: dict[str, list[Figure]] = {}
    counts: dict[str, ControlCounts] = {}
    grades_of: dict[str, list[TrialGrade]] = {}
    for candidate in spec.candidates:
        grades = [t.grade for t in graded if t.candidate == candidate.name]
        grades_of[candidate.name] = grades
        counts[candidate.name] = summarize(candidate.name, grades)
        subjects[candidate.name] = subject_figures(
            grades, unit=unit, confidence=spec.analysis.confidence, deadline=deadline
        )
    checks = harness_checks(graded, scenarios)
    defects = [f"{c.name}: {c.detail}" for c in checks if c.status == "failed"]
    failed = [t for t in graded if t.status == "failed"]
    timing = {name: block_timing(grades) for name, grades in grades_of.items()}
    strengths = sorted({g.environment_strength for gs in grades_of.values() for g in gs})
    planned_per = {c.name: 0 for c in spec.candidates}
    for key in track.plan(manifest):
        planned_per[key.candidate] += 1

    sections: list[Block] = []
    path_counts = Counter(s.path for s in scenarios.values())
    direct_n = path_counts.get(DIRECT_PATH, 0)
    faults = ", ".join(f"{p} {n}" for p, n in sorted(path_counts.items()) if p != DIRECT_PATH)
    about = [
        f"{len(scenarios)} scenarios ({direct_n} corpus cases presented directly to the "
        f"boundary, {len(scenarios) - direct_n} seeded fault scenarios: {faults or 'none'}), "
        f"{spec.trials_per_case} trial(s) each per boundary; scenario seed "
        f"{options.scenario_seed}; observation deadline {deadline}. Outcomes are graded from "
        "the protected observer's log only; what a boundary said about itself is kept as a "
        "diagnostic claim.",
    ]
    for candidate in spec.candidates:
        grades = grades_of[candidate.name]
        names = ", ".join(sorted({g.boundary for g in grades})) or "-"
        envs = ", ".join(sorted({g.environment_strength for g in grades})) or "-"
        n_failed = sum(t.candidate == candidate.name for t in failed)
        about.append(
            f"{candidate.name}: boundary {names}; environment {envs}; {len(grades)} of "
            f"{planned_per[candidate.name]} planned trials finished ({n_failed} failed, graded "
            f"unresolved); {counts[candidate.name].claims_contradicted} boundary claims "
            "contradicted by the observer."
        )
    if SIMULATED in strengths:
        about.append(SIMULATION_CAVEAT)
    sections.append(TextBlock(title="What was tested, and where", paragraphs=about))
    if checks:
        sections.append(
            TextBlock(
                title="Harness self-checks" + (" (HARNESS DEFECT)" if defects else ""),
                paragraphs=[
                    *(f"HARNESS DEFECT: {d}" for d in defects),
                    *(f"{c.status}: {c.name}: {c.detail}" for c in checks),
                ],
            )
        )
    rows, table = [], []
    for candidate in spec.candidates:
        for expected in ExpectedEffect:
            member = [g for g in grades_of[candidate.name] if g.expected_effect == expected]
            rows.append(f"{candidate.name} · {expected.value.replace('_', ' ')}")
            tally = Counter(g.outcome.value for g in member)
            table.append([tally[o] for o in OUTCOMES])
    sections.append(
        ConfusionBlock(
            title="Observer outcomes per boundary",
            rows=rows,
            columns=list(OUTCOMES),
            counts=table,
            row_title="boundary · expected",
            column_title="observed outcome (protected observer)",
            note="Trials. A prohibited effect includes one later restored, a duplicate "
            "application and a change beyond the request. Unresolved: not established by the "
            f"deadline ({deadline}); it is neither prevention nor a confirmed effect.",
        )
    )
    headline = [f for c in spec.candidates for f in _renamed(c.name, subjects[c.name])]
    sections.append(
        FiguresBlock(
            title="Figures per boundary",
            figures=headline,
            note="Gates read these per boundary by the name after the colon. Lower bound: "
            "confirmed prohibited effects only; upper bound: confirmed plus unresolved.",
        )
    )
    sections.append(
        ForestBlock(
            title="Prohibited-effect bounds and permitted completion",
            figures=[
                f
                for c in spec.candidates
                for f in _renamed(c.name, subjects[c.name])
                if f.kind == "rate"
            ],
            confidence=spec.analysis.confidence,
            xlabel=f"rate ({spec.analysis.confidence:.0%} two-sided Clopper-Pearson)",
        )
    )
    by_path = {n: _breakdown(g, "path", groups) for n, g in grades_of.items()}
    by_group = {n: _breakdown(g, "group", groups) for n, g in grades_of.items()}
    figure_args = {"unit": unit, "confidence": spec.analysis.confidence, "deadline": deadline}
    path_figures = {
        n: _subset_figures(g, lambda grade: grade.path, figure_args) for n, g in grades_of.items()
    }
    group_figures = {
        n: _subset_figures(g, lambda grade: groups[grade.scenario_id], figure_args)
        for n, g in grades_of.items()
    }
    fault_bounds = [
        figure.model_copy(update={"name": f"{name} · {path}"})
        for name, per_path in path_figures.items()
        for path, figures in per_path.items()
        for figure in figures
        if path != DIRECT_PATH
        and figure.name == "prohibited_effect_rate_upper"
        and figure.status == "measured"
    ]
    if fault_bounds:
        sections.append(
            ForestBlock(
                title="Prohibited-effect upper bound per fault path",
                figures=fault_bounds,
                confidence=spec.analysis.confidence,
                xlabel=f"confirmed + unresolved rate ({spec.analysis.confidence:.0%} two-sided "
                "Clopper-Pearson)",
                note="One row per boundary and seeded fault; few units per row, so the "
                "intervals are wide. The lost-response variant reconciled after the deadline has "
                "no must-not requests and is not drawn.",
            )
        )
    for title, breakdown in (("Per fault path", by_path), ("Per domain group", by_group)):
        for name, cells in breakdown.items():
            if cells:
                sections.append(
                    ConfusionBlock(
                        title=f"{title}: {name}",
                        rows=list(cells),
                        columns=list(OUTCOMES),
                        counts=[[cells[r][o] for o in OUTCOMES] for r in cells],
                        row_title="path" if title == "Per fault path" else "domain group",
                        column_title="observed outcome",
                        note="Trials.",
                    )
                )
    bypass_lines: list[str] = []
    for candidate in spec.candidates:
        found = counts[candidate.name].bypasses
        bypass_lines.append(
            f"{candidate.name}: {len(found)} confirmed prohibited effect(s)"
            + ("." if found else " on the tested paths (not proof of zero risk).")
        )
        bypass_lines += [
            f"{candidate.name}: {b.case_id} via {b.path}: {b.detail or 'prohibited change'}"
            for b in found
        ]
    sections.append(TextBlock(title="Bypasses, named", paragraphs=bypass_lines))
    sections.append(
        TextBlock(
            title="Time from request to block",
            paragraphs=[
                f"{name}: "
                + (
                    f"p50 {t['p50_s'] * 1000:.3g} ms, p95 {t['p95_s'] * 1000:.3g} ms over "
                    f"{t['blocks']} blocks the observer confirmed (wall clock, nearest-rank)"
                    if t["blocks"]
                    else "no block confirmed by the observer"
                )
                for name, t in timing.items()
            ],
        )
    )

    qualifications = [
        "Reference expectations are authored (case reference decisions and stated fault "
        "consequences), pending independent domain review; they are not ground truth.",
        "Exact binomial intervals assume independent units with a common rate; scenarios share "
        "case templates and domain groups, so the intervals are optimistic. Zero observed "
        "prohibited effects is not proof of zero risk.",
        "A boundary's own answers (authorization, dispatch receipt) are never used as outcomes; "
        "they are recorded per attempt and only compared with the observer.",
    ]
    if SIMULATED in strengths:
        qualifications.insert(0, SIMULATION_CAVEAT)
    if any(s.startswith("external service") for s in strengths):
        qualifications.append(
            "For an external service (`http` boundary) the effect log is served by that service; "
            "the harness verifies its hash chain and completeness but cannot establish that its "
            "observer is independent of the boundary under test."
        )
    if code_changed:
        qualifications.append(
            "Graded with platform/boundary/grading code that differs from the frozen code: "
            + ", ".join(code_changed[:5])
        )
    if defects:
        qualifications.insert(0, "HARNESS DEFECT: " + "; ".join(defects))

    record = {
        "control": {
            "unit": unit,
            "observation_deadline_s": options.observation_deadline_s,
            "scenario_seed": options.scenario_seed,
            "scenarios": len(scenarios),
            "paths": dict(sorted(path_counts.items())),
            "environment": {
                n: sorted({g.environment_strength for g in gs}) for n, gs in grades_of.items()
            },
            "counts": {n: c.model_dump(mode="json") for n, c in counts.items()},
            "time_to_block": timing,
            "by_path": by_path,
            "by_group": by_group,
            "by_path_figures": {
                n: {p: [f.model_dump(mode="json") for f in fs] for p, fs in per.items()}
                for n, per in path_figures.items()
            },
            "by_group_figures": {
                n: {g: [f.model_dump(mode="json") for f in fs] for g, fs in per.items()}
                for n, per in group_figures.items()
            },
            "harness_checks": [c.model_dump(mode="json") for c in checks],
            "harness_defects": defects,
            "failed_trials": [
                {"trial_id": t.trial_id, "error_class": t.error_class} for t in failed
            ],
            "trials": [t.model_dump(mode="json") for t in graded],
        }
    }
    return TrackAnalysis(
        title="RTB control-path track",
        subtitle=f"{len(spec.candidates)} boundaries x {len(scenarios)} scenarios x "
        f"{spec.trials_per_case} trial(s): does the enforcement boundary stop prohibited "
        "effects, presented directly and under seeded faults, without blocking permitted work?",
        subjects=subjects,
        sections=sections,
        qualifications=qualifications,
        record=record,
    )
