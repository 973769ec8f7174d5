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

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from trustbench._canonical import file_sha256
from trustbench.core import Evaluability
from trustbench.core.figures import Figure, FigureUnit
from trustbench.errors import CheckFailed
from trustbench.rtb.boundaries import TrialRun, is_instrument
from trustbench.rtb.control._cases import ControlScenario
from trustbench.rtb.control._grading import (
    REQUIRED_EVIDENCE,
    ControlCounts,
    ControlOutcome,
    TrialGrade,
    grade_trial,
    summarize,
)
from trustbench.rtb.control._options import DEFAULT_BOUNDARY_ENTRY, environment_label

if TYPE_CHECKING:
    from trustbench.core import ExperimentSpec, LedgerContents, Manifest
    from trustbench.rtb.control._options import ControlTrackOptions
    from trustbench.rtb.control.track import ControlTrack
from trustbench.rtb.control._figures import (
    _breakdown,
    _subset_figures,
    block_timing,
    harness_checks,
    subject_figures,
)
from trustbench.rtb.control._graded import (
    GradedTrial,
    HarnessCheck,
)


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
    timing: dict[str, dict[str, Any]]
    """Candidate -> time from request to block (`block_timing`)."""
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
    # scenario), `group` by domain group (see `_figures`).
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
        subjects={n: subject_figures(g, **figure_args) for n, g in grades_of.items()},
        path_figures={
            n: _subset_figures(g, lambda grade: grade.path, figure_args)
            for n, g in grades_of.items()
        },
        group_figures={
            n: _subset_figures(g, lambda grade: groups[grade.scenario_id], figure_args)
            for n, g in grades_of.items()
        },
        by_path={n: _breakdown(g, "path", groups) for n, g in grades_of.items()},
        by_group={n: _breakdown(g, "group", groups) for n, g in grades_of.items()},
        timing={n: block_timing(g) for n, g in grades_of.items()},
        checks=harness_checks(_built_in_boundary_trials(spec, graded), scenarios),
        code_changed=code_changed,
    )
