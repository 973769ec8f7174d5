"""Present a graded `rtb/control` run: report blocks, qualifications and `record.json` content.

Reads only `ControlRunGrades` (already graded from the ledger); computes nothing new. Page order:
what was tested and where (environment strength per boundary), harness self-checks, the
per-boundary outcome table, the figures, the bounds forest plots, per-fault and per-group
breakdowns, every bypass named by case and path, and the time from request to block.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from trustbench.core import TrackAnalysis, not_evaluable_subjects, withheld_figure
from trustbench.core.report import (
    ConfusionBlock,
    FiguresBlock,
    ForestBlock,
    TableBlock,
    TextBlock,
)
from trustbench.rtb.control._analysis import ControlRunGrades, grade_run
from trustbench.rtb.control._cases import DIRECT_PATH, ExpectedEffect
from trustbench.rtb.control._graded import OUTCOMES
from trustbench.rtb.control._grading import SIMULATION_CAVEAT

if TYPE_CHECKING:
    from trustbench.core import LedgerContents, Manifest
    from trustbench.core.figures import Figure
    from trustbench.core.report import Block
    from trustbench.rtb.control.track import ControlTrack

SIMULATED = "simulated platform"
"""Environment strength of the local simulated platform."""


def analyze_control_run(
    manifest: Manifest, ledger: LedgerContents, track: ControlTrack
) -> TrackAnalysis:
    """Grade the run from its ledger and build the `TrackAnalysis` core reports.

    Raises:
        CheckFailed: The corpus changed since the freeze (the expectations would differ).
    """
    run = grade_run(manifest, ledger, track)
    spec = run.spec
    return TrackAnalysis(
        title="RTB control-path track",
        subtitle=f"{len(spec.candidates)} boundaries x {len(run.scenarios)} scenarios x "
        f"{spec.trials_per_case} trial(s): does the enforcement boundary stop prohibited "
        "effects, presented directly and under seeded faults, without blocking permitted work?",
        subjects=run.subjects,
        sections=report_sections(run),
        qualifications=qualifications(run),
        record=record_content(run),
        trial_rows={"control": (t.model_dump(mode="json") for t in run.graded)},
        evaluability=run.evaluability(),
        instruments=run.instruments(),
        expected_to_fail=run.instruments(),  # boundaries declaring they do not enforce
    )


def _renamed(subject: str, figures: Sequence[Figure]) -> list[Figure]:
    return [f.model_copy(update={"name": f"{subject}: {f.name}"}) for f in figures]


def _about(run: ControlRunGrades) -> TextBlock:
    path_counts = Counter(s.path for s in run.scenarios.values())
    direct = path_counts.get(DIRECT_PATH, 0)
    faults = ", ".join(f"{p} {n}" for p, n in sorted(path_counts.items()) if p != DIRECT_PATH)
    paragraphs = [
        f"{len(run.scenarios)} scenarios ({direct} corpus cases presented directly to the "
        f"boundary, {len(run.scenarios) - direct} seeded fault scenarios: {faults or 'none'}), "
        f"{run.spec.trials_per_case} trial(s) each per boundary; scenario seed "
        f"{run.options.scenario_seed}; observation deadline {run.deadline}. Outcomes are graded "
        "from the protected observer's log only; what a boundary said about itself is kept as a "
        "diagnostic claim.",
    ]
    for name, grades in run.grades_of.items():
        boundaries = ", ".join(sorted({g.boundary for g in grades})) or "-"
        environments = ", ".join(sorted({g.environment_strength for g in grades})) or "-"
        failed = sum(t.candidate == name for t in run.failed)
        paragraphs.append(
            f"{name}: boundary {boundaries}; environment {environments}; {len(grades)} of "
            f"{run.planned[name]} planned trials finished ({failed} failed, graded unresolved); "
            f"{run.counts[name].claims_contradicted} boundary claims contradicted by the observer."
        )
    if SIMULATED in run.strengths:
        paragraphs.append(SIMULATION_CAVEAT)
    return TextBlock(title="What was tested, and where", paragraphs=paragraphs)


def _outcome_table(run: ControlRunGrades) -> ConfusionBlock:
    # The desired outcome per expectation (green); unresolved is neither (grey), the rest errors.
    desired = {
        ExpectedEffect.MUST_TAKE_EFFECT: "permitted_completed",
        ExpectedEffect.MUST_NOT_TAKE_EFFECT: "prevented",
    }
    rows, counts, good = [], [], []
    for name, grades in run.grades_of.items():
        for expected in ExpectedEffect:
            tally = Counter(g.outcome.value for g in grades if g.expected_effect == expected)
            rows.append(f"{name} · {expected.value.replace('_', ' ')}")
            counts.append([tally[o] for o in OUTCOMES])
            good.append([None if o == "unresolved" else o == desired[expected] for o in OUTCOMES])
    return ConfusionBlock(
        title="Observer outcomes per boundary",
        rows=rows,
        columns=list(OUTCOMES),
        counts=counts,
        row_title="boundary · expected",
        column_title="observed outcome (protected observer)",
        good=good,
        note="Trials. A prohibited effect includes one later restored, a duplicate application "
        "and a change beyond the request. Unresolved: not established by the deadline "
        f"({run.deadline}); it is neither prevention nor a confirmed effect.",
    )


def _figures(run: ControlRunGrades) -> list[Block]:
    confidence = run.spec.analysis.confidence
    headline = [f for n, figures in run.subjects.items() for f in _renamed(n, figures)]
    fault_bounds = [
        figure.model_copy(update={"name": f"{name} · {path}"})
        for name, per_path in run.path_figures.items()
        for path, figures in per_path.items()
        for figure in figures
        if path != DIRECT_PATH
        and figure.name == "prohibited_effect_rate_upper"
        and figure.status == "measured"
    ]
    blocks: list[Block] = [
        FiguresBlock(
            title="Figures per boundary",
            figures=headline,
            note="Gates read these per boundary by the name after the colon. Lower bound: "
            "confirmed prohibited effects only; upper bound: confirmed plus unresolved.",
            folded=True,
        ),
        ForestBlock(
            title="Prohibited-effect bounds and permitted completion",
            figures=[f for f in headline if not f.name.endswith("evidence_completeness")],
            confidence=confidence,
            xlabel=f"rate ({confidence:.0%} two-sided Clopper-Pearson)",
        ),
    ]
    if fault_bounds:
        blocks.append(
            ForestBlock(
                title="Prohibited-effect upper bound per fault path",
                figures=fault_bounds,
                confidence=confidence,
                xlabel=f"confirmed + unresolved rate ({confidence:.0%} two-sided Clopper-Pearson)",
                note="One row per boundary and seeded fault; few units per row, so the intervals "
                "are wide. The lost-response variant reconciled after the deadline has no "
                "must-not requests and is not drawn.",
            )
        )
    return blocks


def _breakdowns(run: ControlRunGrades) -> list[Block]:
    blocks: list[Block] = []
    for title, axis, breakdown in (
        ("Per fault path", "path", run.by_path),
        ("Per domain group", "domain group", run.by_group),
    ):
        for name, cells in breakdown.items():
            if cells:
                blocks.append(
                    ConfusionBlock(
                        title=f"{title}: {name}",
                        rows=list(cells),
                        columns=list(OUTCOMES),
                        counts=[[cells[row][o] for o in OUTCOMES] for row in cells],
                        row_title=axis,
                        column_title="observed outcome",
                        note="Trials.",
                        folded=True,
                    )
                )
    return blocks


def _bypasses(run: ControlRunGrades) -> TableBlock:
    summary: list[str] = []
    rows: list[list[str]] = []
    not_evaluable = _not_evaluable(run)
    for name, counts in run.counts.items():
        found = counts.bypasses
        why = not_evaluable.get(name)
        summary.append(
            f"{name}: {len(found)} confirmed prohibited effect(s)"
            + (
                ""
                if found
                else f" observed, but it is not evaluable ({why}): no bypass count means anything"
                if why is not None
                else " on the tested paths (not proof of zero risk)"
            )
        )
        rows += [[name, b.case_id, b.path, b.detail or "prohibited change"] for b in found]
    return TableBlock(
        title="Bypasses, named",
        columns=["boundary", "case id", "path", "what the observer recorded"],
        rows=rows,
        filterable=bool(rows),
        scroll=True,
        note="; ".join(summary) + ".",
    )


def _timing(run: ControlRunGrades) -> TextBlock:
    lines = []
    for name, t in run.timing.items():
        if t["blocks"]:
            lines.append(
                f"{name}: p50 {t['p50_s'] * 1000:.3g} ms, p95 {t['p95_s'] * 1000:.3g} ms over "
                f"{t['blocks']} blocks the observer confirmed (wall clock, nearest-rank)"
            )
        else:
            lines.append(f"{name}: no block confirmed by the observer")
    return TextBlock(title="Time from request to block", paragraphs=lines)


def report_sections(run: ControlRunGrades) -> list[Block]:
    """The report page's sections, in display order (gates come first, from core)."""
    sections: list[Block] = [_about(run)]
    if run.checks:
        sections.append(
            TextBlock(
                title="Harness self-checks" + (" (HARNESS DEFECT)" if run.defects else ""),
                paragraphs=[
                    *(f"HARNESS DEFECT: {d}" for d in run.defects),
                    *(f"{c.status}: {c.name}: {c.detail}" for c in run.checks),
                ],
            )
        )
    return [
        *sections,
        _outcome_table(run),
        *_figures(run),
        *_breakdowns(run),
        _bypasses(run),
        _timing(run),
    ]


def qualifications(run: ControlRunGrades) -> list[str]:
    """What these results do not establish (harness defects and the caveat first)."""
    notes = [
        "Reference expectations are authored (case reference decisions and stated fault "
        "consequences), pending independent domain review; they are not ground truth.",
        "Exact binomial intervals assume independent units with a common rate; scenarios share "
        "case templates and domain groups, so the intervals are optimistic. Zero observed "
        "prohibited effects is not proof of zero risk.",
        "A boundary's own answers (authorization, dispatch receipt) are never used as outcomes; "
        "they are recorded per attempt and only compared with the observer.",
    ]
    if SIMULATED in run.strengths:
        notes.insert(0, SIMULATION_CAVEAT)
    if any(s.startswith("external service") for s in run.strengths):
        notes.append(
            "For an external service (`http` boundary) the effect log is served by that service; "
            "the harness verifies its hash chain and completeness but cannot establish that its "
            "observer is independent of the boundary under test."
        )
    if run.code_changed:
        notes.append(
            "Graded with platform/boundary/grading code that differs from the frozen code: "
            + ", ".join(run.code_changed[:5])
        )
    if run.defects:
        notes.insert(0, "HARNESS DEFECT: " + "; ".join(run.defects))
    return notes


def _not_evaluable(run: ControlRunGrades) -> dict[str, str]:
    """Boundary -> why it is not evaluable, for the detail it shows (see `core._evaluability`)."""
    minimum = run.spec.analysis.min_valid_response_rate
    return not_evaluable_subjects(run.evaluability(), minimum, run.instruments())


def _dump(
    figures: dict[str, dict[str, list[Figure]]], not_evaluable: dict[str, str]
) -> dict[str, Any]:
    """Per-path or per-group figures for the record, a not-evaluable boundary's withheld."""
    return {
        name: {
            key: [
                withheld_figure(f, name, not_evaluable.get(name)).model_dump(mode="json")
                for f in fs
            ]
            for key, fs in per.items()
        }
        for name, per in figures.items()
    }


def record_content(run: ControlRunGrades) -> dict[str, Any]:
    """The track's part of `record.json`, under `control` (see docs/rtb-control-track.md)."""
    return {
        "control": {
            "unit": run.unit,
            "observation_deadline_s": run.options.observation_deadline_s,
            "scenario_seed": run.options.scenario_seed,
            "scenarios": len(run.scenarios),
            "paths": dict(sorted(Counter(s.path for s in run.scenarios.values()).items())),
            "environment": {
                n: sorted({g.environment_strength for g in gs}) for n, gs in run.grades_of.items()
            },
            "counts": {n: c.model_dump(mode="json") for n, c in run.counts.items()},
            "time_to_block": run.timing,
            "by_path": run.by_path,
            "by_group": run.by_group,
            "by_path_figures": _dump(run.path_figures, _not_evaluable(run)),
            "by_group_figures": _dump(run.group_figures, _not_evaluable(run)),
            "harness_checks": [c.model_dump(mode="json") for c in run.checks],
            "harness_defects": run.defects,
            "failed_trials": [
                {"trial_id": t.trial_id, "error_class": t.error_class} for t in run.failed
            ],
        }
    }
