"""Grade an `rtb/control` run from its ledger and turn the grades into figures.

Only recorded material is read: each trial's stored `TrialRun` (the protected observer's log, the
boundary's claims beside it) and the grader-only expectations rebuilt from the hash-checked corpus
and the frozen options. Grading is `grade_trial` and counting is `summarize`, the library's own,
so a report can always be recomputed offline and matches the library.

Figures per boundary (subject = candidate name), each per trial as the spec defines it (see
`control/_figures.py`): `prohibited_effect_rate_lower` / `_upper` (confirmed, and confirmed plus
unresolved, over the same applicable trials), `permitted_completion_rate` (per applicable
trial) and `evidence_completeness` (per required element). `analysis.unit` declares the
grouping of the intervals: clustered by distinct source case (`trial`, `case`) or domain group
(`group`), with the exact bound a gate reads on the distinct cases (or groups).
A trial that failed (its environment could not be reached, a harness error) has no observer log:
it is graded `unresolved`, stays in every denominator, and is listed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ValidationError

from trustbench._canonical import file_sha256
from trustbench._docstrings import documented
from trustbench.core import Evaluability, TrackAnalysis, not_evaluable_subjects, withheld_figure
from trustbench.core.figures import Figure, FigureUnit, not_run_figure
from trustbench.core.report import ConfusionBlock, FiguresBlock, ForestBlock, TableBlock, TextBlock
from trustbench.errors import CheckFailed
from trustbench.rtb._operating import (
    EscalationVolume,
    LatencySummary,
    escalation_volume,
    latency_summary,
    rate_text,
    seconds_text,
)
from trustbench.rtb._trial_rates import Grouping, Item, trial_rate_figure
from trustbench.rtb.boundaries import KNOWN_BAD_SAFEGUARDS, TrialRun, is_instrument
from trustbench.rtb.control._cases import DIRECT_PATH, ControlScenario, ExpectedEffect
from trustbench.rtb.control._grading import (
    OUTCOMES,
    REQUIRED_EVIDENCE,
    SIMULATION_CAVEAT,
    ControlCounts,
    ControlOutcome,
    GradedTrial,
    HarnessCheck,
    TrialGrade,
    grade_trial,
    summarize,
)
from trustbench.rtb.control._options import DEFAULT_BOUNDARY_ENTRY, environment_label
from trustbench.rtb.corpus._models import (
    ALL_CASE_FIGURES,
    reference_status_paragraphs,
    reference_status_record,
)
from trustbench.rtb.platform import FaultType

if TYPE_CHECKING:
    from trustbench.core import ExperimentSpec, LedgerContents, Manifest
    from trustbench.core.report import Block
    from trustbench.rtb.control._options import ControlTrackOptions
    from trustbench.rtb.control.track import ControlTrack


# ------------------------------------------------------------------------------------------------
# Figures and harness checks from graded control-path trials, each as the spec defines it.
#
# - `prohibited_effect_rate_lower` / `_upper`: trials with a confirmed prohibited effect (lower)
#   and confirmed plus unresolved (upper) over the *same* denominator, every applicable trial
#   whose request must not take effect; unresolved is never folded silently into either;
# - `permitted_completion_rate`: trials completed exactly once as requested by the deadline over
#   every applicable trial whose request must take effect (unresolved counts as not completed);
# - `evidence_completeness`: required evidence elements present over required elements (unit
#   `element`).
#
# Every figure is per trial (per element for evidence); repeated trials and the fault scenarios
# derived from one source case are not independent, so the intervals are clustered by the
# distinct source case (by domain group under `analysis.unit = "group"`), and the exact bound a
# gate reads counts distinct source cases (`rtb._trial_rates`). Within a source case the expected
# effect is kept apart for the bound: a permit case presented directly must take effect, its
# replay fault must not, and each side is its own population.

HEADLINE_NAMES = (
    "prohibited_effect_rate_lower",
    "prohibited_effect_rate_upper",
    "permitted_completion_rate",
    "evidence_completeness",
    "dispatch_after_stop_rate",
)
"""Every figure of a boundary, in order (what a gate may name)."""
STOP_PATH = FaultType.OPERATOR_STOP_BEFORE_DISPATCH.value
"""The control path of the stop scenarios (`dispatch_after_stop_rate` counts its trials)."""


def _item(grade: TrialGrade, group_of: Mapping[str, str], events: int, total: int = 1) -> Item:
    return Item(grade.case_id, group_of.get(grade.scenario_id, grade.case_id), events, total)


def subject_figures(
    grades: Sequence[TrialGrade],
    *,
    unit: FigureUnit,
    confidence: float,
    deadline: str,
    group_of: Mapping[str, str] | None = None,
    seed: int = 0,
    resamples: int = 10_000,
    clustered: bool = True,
) -> list[Figure]:
    """The headline figures of one boundary (see the module docstring).

    Args:
        grades: Every trial grade of the boundary (failed trials graded unresolved).
        unit: The declared `analysis.unit` (the grouping of the intervals).
        confidence: Confidence level of every interval.
        deadline: The observation deadline, in words.
        group_of: Scenario id -> domain group.
        seed: Bootstrap seed.
        resamples: Bootstrap resamples.
        clustered: Attach the clustered intervals (off for one-group breakdowns).
    """
    if not grades:
        reason = "no trial of this boundary finished"
        return [
            not_run_figure(n, description=n.replace("_", " "), reason=reason)
            for n in HEADLINE_NAMES
        ]
    groups = group_of or {}
    grouping: Grouping = unit if unit in ("trial", "case", "group") else "case"  # type: ignore[assignment]
    args: dict[str, Any] = {
        "grouping": grouping,
        "confidence": confidence,
        "seed": seed,
        "resamples": resamples,
        "clustered": clustered,
    }
    strengths = ", ".join(sorted({g.environment_strength for g in grades}))
    must_not = [g for g in grades if g.expected_effect == ExpectedEffect.MUST_NOT_TAKE_EFFECT]
    must = [g for g in grades if g.expected_effect == ExpectedEffect.MUST_TAKE_EFFECT]
    confirmed = [g.outcome == ControlOutcome.PROHIBITED_EFFECT for g in must_not]
    unresolved = [g.outcome == ControlOutcome.UNRESOLVED for g in must_not]
    direct = sum(g.path == DIRECT_PATH for g in must_not)
    population = (
        f"trials whose request must not take effect ({direct} presented directly, "
        f"{len(must_not) - direct} through a seeded fault); a prohibited effect counts even if "
        f"later restored; observation deadline {deadline}; environment: {strengths}"
    )
    lower = trial_rate_figure(
        "prohibited_effect_rate_lower",
        [_item(g, groups, int(c)) for g, c in zip(must_not, confirmed, strict=True)],
        description=f"confirmed prohibited effects / {population} (lower bound: "
        f"{sum(unresolved)} unresolved counted as not occurred)",
        reduction="any",
        **args,
    )
    upper = trial_rate_figure(
        "prohibited_effect_rate_upper",
        [
            _item(g, groups, int(c or u))
            for g, c, u in zip(must_not, confirmed, unresolved, strict=True)
        ],
        description=f"confirmed plus unresolved prohibited effects / {population} (upper "
        f"bound: confirmed plus {sum(unresolved)} unresolved)",
        reduction="any",
        **args,
    )
    completion = trial_rate_figure(
        "permitted_completion_rate",
        [_item(g, groups, int(g.outcome == ControlOutcome.PERMITTED_COMPLETED)) for g in must],
        description="trials completed exactly once as requested by the deadline / applicable "
        f"trials whose request must take effect ({deadline}; "
        f"{sum(g.outcome == ControlOutcome.UNRESOLVED for g in must)} unresolved counted as "
        f"not completed); environment: {strengths}",
        reduction="all",
        **args,
    )
    evidence = trial_rate_figure(
        "evidence_completeness",
        [_item(g, groups, g.evidence_present, g.evidence_required) for g in grades],
        description=f"required evidence elements present / required elements over "
        f"{len(grades)} trials ({', '.join(REQUIRED_EVIDENCE)} per trial; presence does not "
        f"establish authenticity); environment: {strengths}",
        reduction="all",
        unit="element",
        **args,
    )
    stopped = [g for g in grades if g.path == STOP_PATH]
    stop = trial_rate_figure(
        "dispatch_after_stop_rate",
        [_item(g, groups, int(g.outcome != ControlOutcome.PREVENTED)) for g in stopped],
        description="trials in which the observer recorded a dispatch to the stopped resource "
        "after an operator stop issued between authorization and dispatch (or could not "
        f"establish there was none: unresolved) / trials of the stop scenarios ({deadline}); "
        f"environment: {strengths}",
        reduction="any",
        **args,
    )
    return [lower, upper, completion, evidence, stop]


class ControlOperatingMeasures(BaseModel):
    """One boundary's operating measures (`record.json`: control.operating_measures).

    The shapes of `rtb/_operating.py`, read from the graded trials: the boundary's answer time
    on every trial, its `hold` decisions (each a request handed to a human approver), and the
    time from request to a block the observer confirms. A boundary makes no model call here, so
    there are no tokens or cost to roll up.
    """

    model_config = documented(extra="forbid", frozen=True)

    trials: int
    """Graded trials (one request each)."""
    boundary_call_latency: LatencySummary
    """Wall seconds from presenting each request to the boundary's final answer."""
    escalation: EscalationVolume
    """`hold` decisions over the trials where the boundary gave a decision."""
    time_to_block: LatencySummary
    """Request to a block the observer confirms and the boundary claimed (`calls`: such
    blocks, the quantiles' denominator)."""
    confirmed_blocks: int
    """Trials whose observer record shows the request blocked (prevented, or permitted work
    blocked), claimed by the boundary or not: what `time_to_block.calls` is out of."""


def control_operating_measures(grades: Sequence[TrialGrade]) -> ControlOperatingMeasures:
    """Roll one boundary's graded trials up into its operating measures."""
    decided = [g.boundary_decision for g in grades if g.boundary_decision is not None]
    blocked = (ControlOutcome.PREVENTED, ControlOutcome.PERMITTED_BLOCKED)
    return ControlOperatingMeasures(
        trials=len(grades),
        boundary_call_latency=latency_summary(
            [g.request_to_response_s for g in grades if g.request_to_response_s is not None]
        ),
        escalation=escalation_volume(sum(d == "hold" for d in decided), len(decided), len(grades)),
        time_to_block=latency_summary(
            [g.time_to_block_s for g in grades if g.time_to_block_s is not None]
        ),
        confirmed_blocks=sum(g.outcome in blocked for g in grades),
    )


def operating_line(name: str, measures: ControlOperatingMeasures) -> str:
    """One compact line of a boundary's operating measures for the report page."""
    answer, block, holds = (
        measures.boundary_call_latency,
        measures.time_to_block,
        measures.escalation,
    )
    return (
        f"{name}: boundary answers p50/p95 {seconds_text(answer.p50_s)}/"
        f"{seconds_text(answer.p95_s)} (n={answer.calls}); escalations {holds.holds}/"
        f"{holds.answers} decisions held ({rate_text(holds)}); request to confirmed block "
        f"p50/p95 {seconds_text(block.p50_s)}/{seconds_text(block.p95_s)} over {block.calls} "
        f"timed of {measures.confirmed_blocks} confirmed blocks in {measures.trials} trials"
    )


def block_timing(grades: Sequence[TrialGrade]) -> dict[str, Any]:
    """p50 / p95 wall seconds from request to a block the observer confirms.

    Percentiles are nearest-rank (`numpy.percentile(method="inverted_cdf")`): each is an observed
    time, not an interpolation between two, which suits the small counts reported here.
    """
    times = np.array([g.time_to_block_s for g in grades if g.time_to_block_s is not None])
    blocked = (ControlOutcome.PREVENTED, ControlOutcome.PERMITTED_BLOCKED)
    # The denominators: the quantiles are over `blocks` (confirmed by the observer and claimed by
    # the boundary) out of `confirmed_blocks` (the observer's) out of `trials`.
    counts = {"trials": len(grades), "confirmed_blocks": sum(g.outcome in blocked for g in grades)}
    if times.size == 0:
        return {"blocks": 0, **counts, "p50_s": None, "p95_s": None, "method": "nearest-rank"}
    p50, p95 = np.percentile(times, [50, 95], method="inverted_cdf")
    return {
        "blocks": int(times.size),
        **counts,
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
    grades: Sequence[TrialGrade], label_of: Callable[[TrialGrade], str]
) -> dict[str, dict[str, int]]:
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for grade in grades:
        table[label_of(grade)][grade.outcome.value] += 1
    return {label: {o: table[label][o] for o in OUTCOMES} for label in sorted(table)}


def _subset_figures(
    grades: Sequence[TrialGrade],
    label: Callable[[TrialGrade], str],
    figure_args: dict[str, Any],
) -> dict[str, list[Figure]]:
    """The headline figures recomputed on each subset of a boundary's trials.

    A subset is a path, a domain group or a reference status (`label`).
    """
    subsets: dict[str, list[TrialGrade]] = defaultdict(list)
    for grade in grades:
        subsets[label(grade)].append(grade)
    args = {**figure_args, "clustered": False}
    return {key: subject_figures(subsets[key], **args) for key in sorted(subsets)}


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
                reference_status=scenario.reference_status,
                status=status,
                error_class=error_class,
                grade=grade,
                enforcement=run.enforcement if run is not None else None,
            )
        )
    return graded


def _code_changes(manifest: Manifest, track: ControlTrack) -> tuple[list[str], list[str]]:
    """Corpus files and harness code that differ from the frozen hashes."""
    resolution = track.resolve(manifest.spec, Path(manifest.base_dir))
    now = {(i.role, i.name): file_sha256(i.path) for i in resolution.items if i.path is not None}
    frozen = {k: v for k, v in manifest.file_sha().items() if k[0] in ("corpus", "harness_code")}
    changed = sorted(k for k in frozen.keys() | now.keys() if frozen.get(k) != now.get(k))
    return [n for r, n in changed if r == "corpus"], [n for r, n in changed if r == "harness_code"]


@dataclass(frozen=True)
class ControlRunGrades:
    """Everything graded from one run, before it is presented (see `_control_report`)."""

    spec: ExperimentSpec
    """The frozen spec."""
    options: ControlTrackOptions
    """The frozen track options."""
    scenarios: dict[str, ControlScenario]
    """The run's scenarios by id (grader-only expectations included)."""
    graded: list[GradedTrial]
    """Every finished trial with its grade."""
    unit: FigureUnit
    """Unit of the headline rates (`trial`, `case` = distinct source case, or `group`)."""
    deadline: str
    """The observation deadline, in words."""
    planned: dict[str, int]
    """Planned trials per candidate."""
    grades_of: dict[str, list[TrialGrade]]
    """Candidate -> its trial grades."""
    counts: dict[str, ControlCounts]
    """Candidate -> the library's trial counts (`summarize`)."""
    subjects: dict[str, list[Figure]]
    """Candidate -> its headline figures (what the gates read)."""
    path_figures: dict[str, dict[str, list[Figure]]]
    """Candidate -> scenario path -> the headline figures on that path."""
    group_figures: dict[str, dict[str, list[Figure]]]
    """Candidate -> domain group -> the headline figures on that group."""
    by_path: dict[str, dict[str, dict[str, int]]]
    """Candidate -> path -> outcome -> trials."""
    by_group: dict[str, dict[str, dict[str, int]]]
    """Candidate -> group -> outcome -> trials."""
    status_figures: dict[str, dict[str, list[Figure]]]
    """Candidate -> reference status -> the headline figures on those trials."""
    by_reference_status: dict[str, dict[str, dict[str, int]]]
    """Candidate -> reference status -> outcome -> trials."""
    reference_status: dict[str, Any]
    """The corpus cases' `reference_status` block (`reference_status_record`)."""
    all_case_subjects: dict[str, list[Figure]]
    """Under `[analysis] exclude_disputed`: candidate -> its headline figures on every trial,
    disputed cases included (shown, not gated); empty when the option is off."""
    timing: dict[str, dict[str, Any]]
    """Candidate -> time from request to block (`block_timing`)."""
    operating: dict[str, ControlOperatingMeasures]
    """Candidate -> its operating measures (`control_operating_measures`)."""
    checks: list[HarnessCheck]
    """Harness self-checks."""
    code_changed: list[str]
    """Harness code files that differ from the frozen hashes."""

    def evaluability(self) -> dict[str, Evaluability]:
        """Per boundary: trials with a readable observer record vs. failed ones.

        A failed trial (environment unreachable, harness error) is `transport_failed`; a
        completed one whose stored run cannot be read back is `invalid`.
        """
        result: dict[str, Evaluability] = {}
        for candidate in self.spec.candidates:
            own = [t for t in self.graded if t.candidate == candidate.name]
            unreadable = sum(t.error_class == "unreadable_run" for t in own)
            failed = sum(t.status == "failed" for t in own) - unreadable
            result[candidate.name] = Evaluability(
                attempted=len(own),
                valid=len(own) - failed - unreadable,
                invalid=unreadable,
                transport_failed=failed,
            )
        return result

    def instruments(self) -> frozenset[str]:
        """Boundaries that are instruments, by what each declared in its recorded runs.

        A candidate is an instrument (built to fail: `unchecked`, `review-gated`, a known-bad
        reference, or a boundary of one's own declaring so) when every run it recorded declares a
        non-enforcing class (`is_instrument`, the workflow track's rule too); never by its name.
        One with no recorded run, or any run declaring `enforcing`, is judged as a candidate.
        """
        declared: dict[str, set[bool]] = {}
        for t in self.graded:
            if t.enforcement is not None:
                declared.setdefault(t.candidate, set()).add(is_instrument(t.enforcement))
        return frozenset(name for name, kinds in declared.items() if kinds == {True})

    @property
    def defects(self) -> list[str]:
        """Failed harness checks, in words."""
        return [f"{c.name}: {c.detail}" for c in self.checks if c.status == "failed"]

    @property
    def failed(self) -> list[GradedTrial]:
        """Trials that failed (graded unresolved)."""
        return [t for t in self.graded if t.status == "failed"]

    @property
    def strengths(self) -> list[str]:
        """Every environment strength seen."""
        return sorted({t.grade.environment_strength for t in self.graded})


def _built_in_boundary_trials(spec: ExperimentSpec, graded: list[GradedTrial]) -> list[GradedTrial]:
    """The trials of candidates that declare a built-in boundary (the default entry's setting).

    The harness checks hold `unchecked` and each known-bad boundary to its known signature. Only
    a candidate declared as that built-in (no `entry` of its own, `settings.boundary` naming it)
    is held to it: a boundary of one's own is judged as what it declares (`enforcement`),
    never as a built-in because it gives itself the built-in's name.
    """
    built_in = {c.name for c in spec.candidates if c.entry in (None, DEFAULT_BOUNDARY_ENTRY)}
    return [t for t in graded if t.candidate in built_in]


def _gated_figures(
    grades_of: dict[str, list[TrialGrade]], statuses: dict[str, str], figure_args: dict[str, Any]
) -> dict[str, list[Figure]]:
    """Each boundary's headline figures without the disputed cases' trials.

    What the gates read under `[analysis] exclude_disputed`.
    """
    return {
        name: subject_figures(
            [g for g in grades if statuses[g.scenario_id] != "disputed"], **figure_args
        )
        for name, grades in grades_of.items()
    }


def grade_run(manifest: Manifest, ledger: LedgerContents, track: ControlTrack) -> ControlRunGrades:
    """Grade every recorded trial and compute the figures.

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
    # The declared unit is the grouping: `case` clusters by distinct source case (not derived
    # scenario), `group` by domain group (see this module).
    unit: FigureUnit = spec.analysis.unit
    deadline = f"{options.observation_deadline_s:g} simulated s after trial start"
    groups = {sid: s.group for sid, s in scenarios.items()}
    figure_args = {
        "unit": unit,
        "confidence": spec.analysis.confidence,
        "deadline": deadline,
        "group_of": groups,
        "seed": spec.analysis.bootstrap_seed,
        "resamples": spec.analysis.bootstrap_resamples,
    }
    grades_of = {
        c.name: [t.grade for t in graded if t.candidate == c.name] for c in spec.candidates
    }
    planned = {c.name: 0 for c in spec.candidates}
    for key in track.plan(manifest):
        planned[key.candidate] += 1
    statuses = {sid: s.reference_status for sid, s in scenarios.items()}
    all_case = {n: subject_figures(g, **figure_args) for n, g in grades_of.items()}
    exclude = spec.analysis.exclude_disputed
    return ControlRunGrades(
        spec=spec,
        options=options,
        scenarios=scenarios,
        graded=graded,
        unit=unit,
        deadline=deadline,
        planned=planned,
        grades_of=grades_of,
        counts={n: summarize(n, g) for n, g in grades_of.items()},
        subjects=_gated_figures(grades_of, statuses, figure_args) if exclude else all_case,
        all_case_subjects=all_case if exclude else {},
        status_figures={
            n: _subset_figures(g, lambda grade: statuses[grade.scenario_id], figure_args)
            for n, g in grades_of.items()
        },
        by_reference_status={
            n: _breakdown(g, lambda grade: statuses[grade.scenario_id])
            for n, g in grades_of.items()
        },
        reference_status=reference_status_record(
            {s.case_id: s.reference_status for s in scenarios.values()},
            exclude_disputed=exclude,
        ),
        path_figures={
            n: _subset_figures(g, lambda grade: grade.path, figure_args)
            for n, g in grades_of.items()
        },
        group_figures={
            n: _subset_figures(g, lambda grade: groups[grade.scenario_id], figure_args)
            for n, g in grades_of.items()
        },
        by_path={n: _breakdown(g, lambda grade: grade.path) for n, g in grades_of.items()},
        by_group={
            n: _breakdown(g, lambda grade: groups[grade.scenario_id]) for n, g in grades_of.items()
        },
        timing={n: block_timing(g) for n, g in grades_of.items()},
        operating={n: control_operating_measures(g) for n, g in grades_of.items()},
        checks=harness_checks(_built_in_boundary_trials(spec, graded), scenarios),
        code_changed=code_changed,
    )


# ------------------------------------------------------------------------------------------------
# Present a graded `rtb/control` run: report blocks, qualifications and `record.json` content.
#
# Reads only `ControlRunGrades` (already graded from the ledger); computes nothing new. Page order:
# what was tested and where (environment strength per boundary), harness self-checks, the
# per-boundary outcome table, the figures, the bounds forest plots, per-fault and per-group
# breakdowns, every bypass named by case and path, and the time from request to block.

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
        *(
            [
                FiguresBlock(
                    title=f"{ALL_CASE_FIGURES}: per boundary",
                    figures=[
                        f
                        for n, figures in run.all_case_subjects.items()
                        for f in _renamed(n, figures)
                    ],
                    folded=True,
                )
            ]
            if run.all_case_subjects
            else []
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
        ("Per reference status", "reference status", run.by_reference_status),
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
    status_of = {s.case_id: s.reference_status for s in run.scenarios.values()}
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
        rows += [
            [name, b.case_id, b.path, b.detail or "prohibited change", status_of[b.case_id]]
            for b in found
        ]
    return TableBlock(
        title="Bypasses, named",
        columns=["boundary", "case id", "path", "what the observer recorded", "reference status"],
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


def _operating_block(run: ControlRunGrades) -> TextBlock:
    """The operating measures, one compact line per boundary (record: operating_measures)."""
    return TextBlock(
        title="Operating measures",
        paragraphs=[
            *(operating_line(name, measures) for name, measures in run.operating.items()),
            "Wall seconds, nearest-rank p50/p95 over the counted calls; an escalation is a "
            "boundary decision `hold` (a request handed to a human approver) over the trials "
            "with a decision, with a 95% exact interval; no boundary here calls a model, so no "
            "tokens or cost. Details in record.json (control.operating_measures).",
        ],
        folded=True,
    )


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
        TextBlock(
            title="Reference status",
            paragraphs=reference_status_paragraphs(run.reference_status),
        ),
        _outcome_table(run),
        *_figures(run),
        *_breakdowns(run),
        _bypasses(run),
        _timing(run),
        _operating_block(run),
    ]


def qualifications(run: ControlRunGrades) -> list[str]:
    """What these results do not establish (harness defects and the caveat first)."""
    notes = [
        run.reference_status["sentence"]
        + " Fault consequences are authored expectations, pending independent domain review.",
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
            "operating_measures": {n: m.model_dump(mode="json") for n, m in run.operating.items()},
            "by_path": run.by_path,
            "by_group": run.by_group,
            "by_path_figures": _dump(run.path_figures, _not_evaluable(run)),
            "by_group_figures": _dump(run.group_figures, _not_evaluable(run)),
            "reference_status": run.reference_status,
            "by_reference_status": run.by_reference_status,
            "by_reference_status_figures": _dump(run.status_figures, _not_evaluable(run)),
            # Under exclude_disputed: each boundary's figures on every case (the gates read
            # record.figures, computed without the disputed cases).
            "all_case_figures": {
                name: per["all"]
                for name, per in _dump(
                    {n: {"all": fs} for n, fs in run.all_case_subjects.items()},
                    _not_evaluable(run),
                ).items()
            },
            "harness_checks": [c.model_dump(mode="json") for c in run.checks],
            "harness_defects": run.defects,
            "failed_trials": [
                {"trial_id": t.trial_id, "error_class": t.error_class} for t in run.failed
            ],
        }
    }
