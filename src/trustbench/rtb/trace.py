"""`trustbench rtb trace`: one case (or stateful fault) traced across the three RTB tracks.

The spec's closing test: "choose one plausible shared failure and demonstrate which reviewer
detects it, which control stops it, and which independent record proves the outcome". Each track
reports alone; this joins finished runs of the reviewer, control and workflow tracks by corpus
case and fault kind, and shows for each track the rows its ledger holds:

- *detect* (reviewer track): each configuration's decision per trial, graded from the recorded
  reply by the track's own grader (`member_trials`, `configuration_rows`);
- *stop* (control track): each boundary's claimed authorization and dispatch, and the outcome the
  protected observer's log establishes (`grade_trial`);
- *prove* (workflow track): what the protected observer recorded of each agent x boundary trial
  (`grade_workflow_trial`): prohibited effect, unresolved, effect sequence numbers, evidence.

Every row names its run folder, its ledger trial id and the ids of its attempt rows, so each
answer can be checked against the ledger; nothing comes from a candidate's own claim of success
(a boundary's claim is printed beside the observer's verdict, never instead of it).

How the tracks name a case: the reviewer track's ledger case id is the corpus case id; the
control and workflow tracks' is the scenario id `<case_id>/<path or kind>`, where `direct`
presents the case unchanged and a fault kind names a stateful scenario seeded on that case. Both
tracks pick, per group and kind, one eligible case by their seed, so a fault may be seeded on a
case in one track and not the other: that track then shows "no row for this case" explicitly.
The workflow track's `metadata_forging` is the control track's `actor_edits_metadata` (the same
case shape, `workflow._scenarios._FAULT_ELIGIBILITY`); the other shared kinds share their name.
Reviewers are never shown faults: the reviewer track's rows are its decisions on the case as
authored, the proposal every stateful scenario on that case starts from.

Every run is verified first (`verify_run`: manifest, ledger chain, sign-offs, frozen inputs);
runs of different corpora (version or MANIFEST.json hash) are refused, as is a case id a run
does not hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trustbench.core import LedgerContents, Manifest, open_ledger, read_manifest, verify_run
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.platform import FaultType
from trustbench.rtb.workflow._scenarios import WorkflowKind

if TYPE_CHECKING:
    from trustbench.rtb.boundaries import TrialRun

REVIEW, CONTROL, WORKFLOW = "review", "control", "workflow"
TRACKS = (REVIEW, CONTROL, WORKFLOW)
"""The three RTB tracks, in the order the closing test asks: detect, stop, prove."""
QUESTIONS = {
    REVIEW: "detect: reviewer decisions (reviewer track)",
    CONTROL: "stop: boundary outcomes (control track)",
    WORKFLOW: "prove: the protected observer's evidence (workflow track)",
}
DIRECT = "direct"
"""The scenario path / kind that presents a case unchanged (both stateful tracks)."""
NO_ROW = "no row for this case in this track"

_WORKFLOW_FOR_CONTROL = {FaultType.ACTOR_EDITS_METADATA.value: WorkflowKind.METADATA_FORGING.value}
"""Control fault -> workflow kind where the names differ for the same failure."""


@dataclass(frozen=True)
class TraceRow:
    """One ledger trial of one track, as the trace shows it."""

    subject: str
    """The reviewer configuration, boundary, or agent x boundary configuration."""
    trial_id: str
    """The ledger's trial id (`trials.trial_id`)."""
    attempt_ids: list[int]
    """Row ids of the trial's counted attempts (`attempts.id`)."""
    scenario_id: str
    """The ledger's case id: the case id (reviewer track) or `<case_id>/<kind>`."""
    answer: str
    """The track's answer from records: a decision, an observer outcome, an effect verdict."""
    detail: str = ""
    """What else the records say (members' decisions, the boundary's claim, evidence)."""


@dataclass
class TrackTrace:
    """One run's rows for the traced case, or why it has none."""

    track: str
    """`review`, `control` or `workflow`."""
    run: str
    """The run folder."""
    rows: list[TraceRow] = field(default_factory=list)
    """The trials of the case (and fault), in ledger order."""
    note: str = ""
    """Why the run shows no row, or how its rows relate to the fault (empty otherwise)."""


@dataclass(frozen=True)
class _Run:
    folder: Path
    manifest: Manifest
    track: str


def _corpus_identity(manifest: Manifest) -> tuple[str | None, str | None]:
    """The corpus version label and the sha256 of its MANIFEST.json, as the run froze them."""
    digest = next(
        (f.sha256 for f in manifest.files if f.role == "corpus" and f.name == "MANIFEST.json"),
        None,
    )
    return manifest.corpus.version, digest


def _verified(folder: Path) -> _Run:
    """The run's manifest after `verify_run` passed; a tampered or unfinished run is refused."""
    manifest = read_manifest(folder)
    if manifest.spec.suite != "rtb" or manifest.spec.track not in TRACKS:
        raise InputError(
            f"not an RTB reviewer, control or workflow run (suite {manifest.spec.suite}, track "
            f"{manifest.spec.track})",
            location=str(folder),
        )
    report = verify_run(folder)
    if not report.ok:
        raise CheckFailed(
            f"refused: the run does not verify: {report.problems[0]}",
            location=str(folder / "ledger.sqlite"),
        )
    return _Run(folder, manifest, manifest.spec.track)


def _same_corpus(runs: Sequence[_Run]) -> tuple[str | None, str | None]:
    """The one corpus every run was frozen on.

    Raises:
        InputError: two runs name different corpora (version or MANIFEST.json hash).
    """
    first = _corpus_identity(runs[0].manifest)
    for run in runs[1:]:
        other = _corpus_identity(run.manifest)
        if other != first:
            raise InputError(
                f"runs of different corpora: {runs[0].folder} has corpus {first[0]} (MANIFEST "
                f"sha256 {first[1]}), {run.folder} has corpus {other[0]} (MANIFEST sha256 "
                f"{other[1]})",
                location=str(run.folder),
            )
    return first


def _fault_paths(fault: str | None) -> dict[str, str | None]:
    """The scenario kind each stateful track runs for `fault` (None: that track has no such).

    Raises:
        InputError: an unknown fault kind.
    """
    if fault is None:
        return {CONTROL: DIRECT, WORKFLOW: DIRECT}
    control_kinds = {f.value for f in FaultType}
    workflow_kinds = {k.value for k in WorkflowKind}
    if fault not in control_kinds | workflow_kinds:
        known = ", ".join(sorted(control_kinds | workflow_kinds))
        raise InputError(f"unknown fault kind {fault!r} (known: {known})", location="--fault")
    to_control = {w: c for c, w in _WORKFLOW_FOR_CONTROL.items()}
    control = fault if fault in control_kinds else to_control.get(fault)
    workflow = _WORKFLOW_FOR_CONTROL.get(fault, fault if fault in workflow_kinds else None)
    return {CONTROL: control, WORKFLOW: workflow}


def _case_trials(run: _Run, case_id: str) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The run's finished trials of `case_id` (any scenario on it), each with its attempts.

    Raises:
        InputError: the run holds no trial of the case.
    """
    found = [
        (trial, attempts)
        for trial, attempts in open_ledger(run.folder, attempt_texts=False).iter_trials()
        if trial["case_id"] == case_id or str(trial["case_id"]).startswith(f"{case_id}/")
    ]
    if not found:
        raise InputError(
            f"case {case_id} is absent from this {run.track} run (no trial of it in the ledger)",
            location=str(run.folder),
        )
    return found


def _attempt_ids(attempts: Iterable[dict[str, Any]]) -> list[int]:
    return [int(a["id"]) for a in attempts]


def _review_rows(run: _Run, case_id: str) -> list[TraceRow]:
    """Each configuration's decision per trial, graded by the reviewer track's own grader."""
    from trustbench.rtb.review._grading import configuration_rows, member_trials
    from trustbench.rtb.review._options import configurations
    from trustbench.rtb.review.track import ReviewTrack

    trials = _case_trials(run, case_id)
    corpus = ReviewTrack().corpus(run.manifest.corpus.root)
    one_case = corpus.model_copy(
        update={"cases": [c for c in corpus.cases if c.case_id == case_id]}
    )
    counted = [a for _, attempts in trials for a in attempts]
    ledger = LedgerContents(rows=([t for t, _ in trials], counted, [], []))
    graded = member_trials(run.manifest, ledger, one_case)
    ids = {(t["candidate"], int(t["trial_index"])): t["trial_id"] for t, _ in trials}
    attempts_of = {t["trial_id"]: _attempt_ids(a) for t, a in trials}
    rows: list[TraceRow] = []
    k = run.manifest.spec.trials_per_case
    for configuration, members in configurations(run.manifest.spec):
        if not members:
            continue  # the unchecked baseline: no reviewer, no ledger row
        chain, _ = configuration_rows(configuration, members, one_case, k, graded)
        for item in chain:
            trial_ids = [ids[(m.candidate, m.trial)] for m in item.members]
            detail = ", ".join(f"{m.candidate}: {m.validated.outcome.value}" for m in item.members)
            rows.append(
                TraceRow(
                    subject=configuration.name,
                    trial_id=" + ".join(trial_ids),
                    attempt_ids=[a for t in trial_ids for a in attempts_of[t]],
                    scenario_id=case_id,
                    answer=item.row.observed.value,
                    detail=f"authored reference decision {item.row.reference.value}"
                    + (f"; members {detail}" if len(item.members) > 1 else ""),
                )
            )
    return rows


def _control_rows(run: _Run, case_id: str, path: str) -> list[TraceRow]:
    """Each boundary's claim and the outcome the observer's log establishes."""
    from trustbench.rtb.boundaries import TrialRun
    from trustbench.rtb.control._grading import grade_trial
    from trustbench.rtb.control.track import ControlTrack

    scenarios = ControlTrack().scenarios(run.manifest)
    rows = []
    for trial, attempts in _case_trials(run, case_id):
        scenario = scenarios[trial["case_id"]]  # the plan the verified manifest froze
        if scenario.path.split("/")[0] != path:
            continue
        outcome = trial.get("outcome") or {}
        if trial["status"] != "completed" or "run" not in outcome:
            answer, claim = "not graded: the trial failed", str(trial.get("error_class"))
        else:
            recorded = TrialRun.model_validate(outcome["run"])
            grade = grade_trial(scenario, recorded)
            answer = f"observer: {grade.outcome.value}"
            claim = _boundary_claim(recorded) + (
                f"; effect seqs {grade.effect_seqs}" if grade.effect_seqs else ""
            )
            claim += f"; expected {scenario.expected_effect.value}"
        rows.append(
            TraceRow(
                subject=str(trial["candidate"]),
                trial_id=str(trial["trial_id"]),
                attempt_ids=_attempt_ids(attempts),
                scenario_id=scenario.scenario_id,
                answer=answer,
                detail=claim,
            )
        )
    return rows


def _boundary_claim(recorded: TrialRun) -> str:
    """What the boundary said (authorization, dispatch receipt): a claim, never the verdict."""
    said = []
    if recorded.authorization is not None:
        said.append(f"authorized {recorded.authorization.decision.value}")
    if recorded.receipt is not None:
        said.append(f"dispatch {recorded.receipt.status}")
    if recorded.boundary_error:
        said.append(f"error {recorded.boundary_error}")
    return "boundary claimed " + (", ".join(said) or "nothing")


def _workflow_rows(run: _Run, case_id: str, kind: str) -> list[TraceRow]:
    """What the protected observer recorded of each agent x boundary trial."""
    from trustbench.rtb.workflow._grading import grade_workflow_trial
    from trustbench.rtb.workflow._models import WorkflowTrialRun
    from trustbench.rtb.workflow.track import WorkflowTrack

    scenarios = WorkflowTrack().scenarios(run.manifest)
    rows = []
    for trial, attempts in _case_trials(run, case_id):
        scenario = scenarios[trial["case_id"]]
        outcome = trial.get("outcome") or {}
        if scenario.script.kind != kind:
            continue
        if "run" not in outcome:
            answer, detail = "not graded: no recorded run", str(trial.get("error_class"))
        else:
            grade = grade_workflow_trial(scenario, WorkflowTrialRun.model_validate(outcome["run"]))
            answer = (
                "unresolved"
                if grade.unresolved
                else "prohibited effect"
                if grade.prohibited_effect
                else "no prohibited effect"
            )
            supported = sum(claim.supported for claim in grade.claims)
            detail = (
                f"agent {grade.agent} x boundary {grade.boundary}; violation seqs "
                f"{grade.violation_seqs}; evidence {grade.evidence_present}/"
                f"{grade.evidence_required}; completion claims supported {supported}/"
                f"{len(grade.claims)}; chain {'intact' if grade.chain_intact else 'BROKEN'}"
            )
        rows.append(
            TraceRow(
                subject=str(trial["candidate"]),
                trial_id=str(trial["trial_id"]),
                attempt_ids=_attempt_ids(attempts),
                scenario_id=scenario.scenario_id,
                answer=answer,
                detail=detail,
            )
        )
    return rows


def _track_trace(run: _Run, case_id: str, fault: str | None) -> TrackTrace:
    traced = TrackTrace(track=run.track, run=str(run.folder))
    if run.track == REVIEW:
        traced.rows = _review_rows(run, case_id)
        if fault is not None:
            traced.note = "reviewers see the case as authored (no fault is presented to them)"
        return traced
    kind = _fault_paths(fault)[run.track]
    if kind is None:
        _case_trials(run, case_id)  # the case itself must still be in the run
        traced.note = f"{NO_ROW}: the {run.track} track has no fault kind {fault}"
        return traced
    traced.rows = (
        _control_rows(run, case_id, kind)
        if run.track == CONTROL
        else _workflow_rows(run, case_id, kind)
    )
    if not traced.rows:
        traced.note = f"{NO_ROW}: no {kind} scenario was seeded on it in this run"
    return traced


def trace_case(folders: Sequence[Path], case_id: str, fault: str | None = None) -> dict[str, Any]:
    """Trace one case (and stateful fault) across finished runs of the three tracks.

    Args:
        folders: Run folders of the reviewer, control and workflow tracks (any subset).
        case_id: The corpus case id.
        fault: A stateful fault kind of the control or workflow track; None traces the case as
            presented directly.

    Returns:
        The trace as JSON-ready data: corpus, case, fault, and one entry per run.

    Raises:
        CheckFailed: a run does not verify (tampered, or not finished).
        InputError: no run given, runs of different corpora, an unknown fault kind, or a case
            absent from a run.
    """
    if not folders:
        raise InputError("give at least one run folder", location="RUN")
    _fault_paths(fault)  # an unknown kind is refused before any run is read
    runs = [_verified(folder) for folder in folders]
    version, manifest_sha256 = _same_corpus(runs)
    return {
        "case_id": case_id,
        "fault": fault,
        "corpus": {"version": version, "manifest_sha256": manifest_sha256},
        "runs": [asdict(_track_trace(run, case_id, fault)) for run in runs],
    }


def trace_text(trace: dict[str, Any]) -> str:
    """The trace for people: the three questions in order, each run's rows below its question."""
    corpus = trace["corpus"]
    fault = f", fault {trace['fault']}" if trace["fault"] else ", presented directly"
    lines = [
        f"case {trace['case_id']}{fault}; corpus {corpus['version']} (MANIFEST sha256 "
        f"{(corpus['manifest_sha256'] or '?')[:16]}...); every run verified"
    ]
    for track in TRACKS:
        lines.append("")
        lines.append(QUESTIONS[track])
        runs = [r for r in trace["runs"] if r["track"] == track]
        if not runs:
            lines.append("  (no run of this track given)")
        for run in runs:
            lines.append(f"  run {run['run']}" + (f": {run['note']}" if run["note"] else ""))
            for row in run["rows"]:
                attempts = ", ".join(f"#{i}" for i in row["attempt_ids"]) or "none"
                lines.append(
                    f"    {row['subject']}: {row['answer']}  [trial {row['trial_id']}; "
                    f"attempts {attempts}]"
                )
                if row["detail"]:
                    lines.append(f"      {row['detail']}")
    return "\n".join(lines)
