"""`trustbench report RUN_DIR`: grade a run from its ledger, evaluate gates, write the record.

Order of work: verify the manifest and the ledger chain (a tampered ledger is never reported;
on a second core the ledger is verified in a second process while the track grades, and nothing
is written before it answers: `_verify.py`); re-check every frozen input (an answer key edited
after the freeze is never used to grade); let the track grade the recorded trials; evaluate
every declared gate exactly as frozen, once per subject it applies to; write `record.json`
(machine) and `report.html` (people). A run that was interrupted is still reported, marked
incomplete: its unrun trials are "not run", never zero.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from trustbench import __version__
from trustbench.core._analysis import Analyzer, TrackAnalysis
from trustbench.core._attestation import write_record_statement
from trustbench.core._evaluability import (
    apply_evaluability,
    evaluability_blocks,
    gate_on_evaluability,
    withhold_not_evaluable,
)
from trustbench.core._export import LedgerContents, model_ids_by_candidate, open_ledger
from trustbench.core._second_process import SecondProcess
from trustbench.core._signing import load_private_key
from trustbench.core._track import DEFAULT_SUBJECT, SubjectDescription, Track, load_track
from trustbench.core._verify import Verification, VerifyReport, second_process_for
from trustbench.core.gates import GateResult, GateSpec, evaluate_gates
from trustbench.core.spec._manifest import Manifest, check_inputs, read_manifest
from trustbench.errors import CheckFailed, InputError

if TYPE_CHECKING:  # the report package (its page models, record writer) is for `report` only
    from trustbench.core.report import Verdict
    from trustbench.core.report._system import Access, SystemUnderTest


@dataclass
class ReportResult:
    """What `report_run` wrote and decided."""

    record_path: Path
    """The written `record.json`."""
    html_path: Path
    """The written `report.html`."""
    gates: list[GateResult]
    """Every gate result, one per (gate, subject)."""
    complete: bool
    """True only when every planned trial ran and the run signed off (see `INCOMPLETE_EXIT`)."""
    verdicts: list[Verdict] = field(default_factory=list)
    """One verdict per gated subject (candidates and instruments), as the page shows them."""
    incomplete: str | None = None
    """Why the run is incomplete ("6 of 180 planned trials ran"), None when complete."""
    summary: dict[str, Any] = field(default_factory=dict)
    """The track's keys for `report --json` (`TrackAnalysis.summary`)."""

    @property
    def blocked(self) -> bool:
        """True when a candidate's gate failed or could not be read, or the harness misbehaved.

        Instruments failing as they are built to do not block (see `release_blocked`).
        """
        from trustbench.core.report import release_blocked

        return release_blocked(self.gates, self.verdicts)


def evaluate_subject_gates(
    specs: list[GateSpec], subjects: dict[str, list[Any]]
) -> list[GateResult]:
    """Evaluate each gate once per subject it applies to (all subjects when none are named).

    A gate naming a subject that has no figures is `not_evaluable` (never a pass). Each result
    is named `"<gate> (<subject>)"` and its reason starts with the subject.
    """
    results: list[GateResult] = []
    for spec in specs:
        for subject in spec.candidates or tuple(subjects):
            named = spec.model_copy(update={"name": f"{spec.label} ({subject})"})
            # The page's gate column shows the metric, not the name: the reason names the
            # subject too, so no reader can miss which configuration failed.
            results += [
                result.model_copy(
                    update={"reason": f"{subject}: {result.reason}", "subject": subject}
                )
                for result in evaluate_gates([named], subjects.get(subject, []))
            ]
    return results


def _not_run(analysis: TrackAnalysis) -> list[str]:
    """Subjects with no evidence: nothing attempted, or every figure "not run"."""
    counts = analysis.evaluability
    return [
        subject
        for subject, figures in analysis.subjects.items()
        if (subject in counts and counts[subject].attempted == 0)
        or (figures and all(f.status == "not_run" for f in figures))
    ]


def _incompleteness(manifest: Manifest, finished: int, verification: VerifyReport) -> str:
    """Why the run is incomplete, in words (for the verdict, the banner and the exit message)."""
    why = f"{finished} of {manifest.plan.trials} planned trials ran"
    if verification.interrupted:
        why += " (the run was interrupted)"
    return why


def subset_qualifications(manifest: Manifest) -> list[str]:
    """What a run on a declared subset (`corpus.families`) does not establish, and the way out.

    The figures of a subset are figures of those cases only; the report says so beside every
    other qualification, naming the families, so a reader never takes them for the corpus's.
    """
    families = manifest.spec.corpus.families
    if families is None:
        return []
    return [
        f"A declared subset of corpus {manifest.corpus.version or manifest.corpus.root}: only the "
        f"cases of the {len(families)} contrast families the spec lists in corpus.families "
        f"({', '.join(families)}). These results do not establish the whole corpus's figures; "
        "for the full corpus run, remove corpus.families from the spec and run `trustbench "
        "freeze SPEC --out RUN`, `trustbench run RUN`, `trustbench report RUN`."
    ]


def _manifest_summary(manifest: Manifest, complete: bool, finished: int) -> dict[str, str]:
    spec = manifest.spec
    families = spec.corpus.families
    return {
        "manifest sha256": manifest.manifest_sha256,
        "suite / track": f"{spec.suite} / {spec.track}",
        "corpus": f"{manifest.corpus.version or '-'} ({manifest.corpus.root})"
        + ("" if families is None else f", declared subset: {len(families)} contrast families"),
        "candidates": ", ".join(c.name for c in spec.candidates),
        "trials": f"{finished} of {manifest.plan.trials} planned finished"
        + ("" if complete else " (run incomplete: the rest are not run)"),
        "trials per case": str(spec.trials_per_case),
        "order seed": str(spec.order_seed),
        "analysis": f"unit {spec.analysis.unit}, confidence {spec.analysis.confidence}, "
        f"bootstrap seed {spec.analysis.bootstrap_seed} x {spec.analysis.bootstrap_resamples}",
        "trustbench": __version__,
    }


def _refuse_altered(run_dir: Path, verification: VerifyReport) -> None:
    """Raise when verification found the run altered (an interrupted run is still reported)."""
    tampering = verification.alterations
    if tampering:
        raise CheckFailed(
            f"refusing to report an altered run: {tampering[0]}",
            location=str(run_dir / "ledger.sqlite"),
        )


def _graded(
    run_dir: Path, manifest: Manifest, *, checked_track: Track | None
) -> tuple[Track, LedgerContents, TrackAnalysis]:
    """The run's track, its opened ledger and the track's analysis of it.

    `checked_track`: the track with which the verification re-hashed the frozen inputs in this
    process and found them intact before grading (None: they were not, and the check here
    raises). It grades from the inputs it hashed, so they are neither hashed nor loaded twice.
    """
    track = checked_track if checked_track is not None else load_track(manifest.spec.track_id)[0]
    if not isinstance(track, Analyzer):
        raise InputError(f"track {manifest.spec.track_id} has no analysis (report unsupported)")
    # Grading reads the corpus (its answer key included): it must be the corpus frozen before
    # the run, or an edited reference decision would silently re-grade the recorded replies.
    if checked_track is None:
        check_inputs(manifest, track)
    # A track that grades from outcomes alone says so (`reads_attempt_texts = False`), and its
    # report then never decompresses or holds the attempts' request and response texts. The
    # ledger is streamed: a track that grades from `iter_trials` holds no ledger row for long.
    ledger = open_ledger(run_dir, attempt_texts=getattr(track, "reads_attempt_texts", True))
    return track, ledger, track.analyze(manifest, ledger)


def candidate_isolation(run_dir: Path) -> dict[str, str]:
    """What each candidate's code ran under, from the run's `candidate_isolation` events.

    A resumed run records it again; a candidate that ran unconfined in any run keeps that mode.
    """
    import sqlite3

    modes: dict[str, str] = {}
    uri = f"{(run_dir / 'ledger.sqlite').resolve().as_uri()}?mode=ro"
    connection = sqlite3.connect(uri, uri=True)
    try:
        rows = connection.execute(
            "SELECT data FROM events WHERE kind = 'candidate_isolation' ORDER BY rowid"
        ).fetchall()
    finally:
        connection.close()
    for (data,) in rows:
        for name, mode in dict(json.loads(data)).items():
            if not modes.get(name, "").startswith("none"):
                modes[str(name)] = str(mode)
    return modes


def _with_isolation_note(note: str, isolation: dict[str, str]) -> str:
    """The verdict note, led by every candidate that ran with `isolation = "none"`."""
    unconfined = sorted(name for name, mode in isolation.items() if mode.startswith("none"))
    if not unconfined:
        return note
    said = f'isolation = "none" for {", ".join(unconfined)} (its code ran in the harness process)'
    return f"{said}; {note}" if note else said


def _system_under_test(run_dir: Path, manifest: Manifest, track: Track) -> SystemUnderTest:
    """The report's "System under test" block: manifest declarations and the ledger's model ids.

    The track says what its configurations are (`subject_description`, default an endpoint on
    a fixed packet) and which it assembles from candidates (`subject_names` beyond them).
    """
    from trustbench.core.report._system import describe_system_under_test

    subject = getattr(track, "subject_description", DEFAULT_SUBJECT)
    if not isinstance(subject, SubjectDescription):
        subject = DEFAULT_SUBJECT
    candidates = {c.name for c in manifest.spec.candidates}
    named = getattr(track, "subject_names", None)  # optional hook: configurations gates name
    names = cast("Iterable[str]", named(manifest.spec)) if callable(named) else ()
    assembled = sorted(set(names) - candidates)
    declared = getattr(track, "candidate_access", None)  # optional hook: access per configuration
    access = cast("Access", declared(manifest.spec)) if callable(declared) else None
    stated = getattr(track, "declared_limits", None)  # optional hook: limits per candidate
    limits = cast("dict[str, str]", stated(manifest.spec)) if callable(stated) else None
    return describe_system_under_test(
        manifest, subject, model_ids_by_candidate(run_dir), assembled, access, limits
    )


def _concurrency_record(manifest: Manifest, ledger: LedgerContents) -> dict[str, Any]:
    """The declared concurrency and every change the run made to it (`concurrency_changed`).

    The declared value is a ceiling: each endpoint's calls in flight halve on a timeout, 429 or
    503 and grow back by one after as many answers in a row (`core._context.AdaptiveConcurrency`).
    `lowest` is the smallest limit any endpoint ran under (the declared value when none changed).
    """
    changes = [
        json.loads(event["data"]) if isinstance(event["data"], str) else event["data"]
        for event in ledger.events_of("concurrency_changed")
    ]
    declared = manifest.spec.concurrency
    return {
        "declared": declared,
        "lowest": min([declared, *(change["to"] for change in changes)]),
        "changes": changes,
    }


def report_run(
    run_dir: Path, *, sign_key: Path | None = None, out_dir: Path | None = None
) -> ReportResult:
    """Grade `run_dir` and write `record.json` and `report.html` into it.

    With `sign_key` (an Ed25519 private key file), `record.intoto.json` is a signed DSSE
    envelope; the key is read before anything is written, so a bad key file changes nothing.
    With `out_dir`, the record, its trial rows and the page go there instead and no statement
    is written (a second report kept apart from the run folder: a sealed held-out set's owner's
    detailed report).

    Raises:
        CheckFailed: the manifest, the ledger chain or a frozen input (e.g. the corpus) was
            altered.
        InputError: the run folder is incomplete or its track cannot be analysed.
    """
    if sign_key is not None:
        load_private_key(sign_key)
    manifest = read_manifest(run_dir)  # a changed manifest is refused here
    # On a second core a second process verifies the ledger while this one grades, then writes
    # the page while this one writes the record (`_verify.py`, `_second_process.py`).
    with second_process_for(run_dir) as beside:
        return _report(run_dir, manifest, beside, sign_key=sign_key, out_dir=out_dir)


def _report(
    run_dir: Path,
    manifest: Manifest,
    beside: SecondProcess | None,
    *,
    sign_key: Path | None,
    out_dir: Path | None,
) -> ReportResult:
    """`report_run`'s work, with the second process `beside` (None: everything here)."""
    # Imported here, not at the top: every `trustbench.core` import (`trustbench run` and
    # `--help` among them) would otherwise build the report's models and load numpy (issue 47).
    from trustbench.core._context import close_workers, run_secrets, start_run_workers
    from trustbench.core.report import (
        TRIAL_ROWS_FILE,
        ReportPage,
        gates_record,
        subject_verdicts,
        write_record_json,
        write_report_html,
        write_trial_rows,
    )
    from trustbench.core.report._html import compile_page_template
    from trustbench.core.report._verdict import withhold_pass

    verification_job = Verification(run_dir, manifest, beside)
    if beside is not None:  # the page it will write: its template compiled while this grades
        beside.ask(compile_page_template)
    if not verification_job.beside:
        _refuse_altered(run_dir, verification_job.result())  # before any grading
    try:
        # A track that asks candidate code while grading (a workflow boundary's declared
        # class) asks its sandbox worker, which may not read this run's folder either.
        start_run_workers(run_secrets(run_dir, manifest))
        track, ledger, analysis = _graded(
            run_dir, manifest, checked_track=verification_job.checked_track
        )
    except Exception:
        # Beside, grading an altered run may fail anywhere (an edited corpus, a ledger row
        # no track expects): the alteration is what to report, as when verified first.
        _refuse_altered(run_dir, verification_job.result())
        raise
    finally:
        close_workers()
    verification = verification_job.result()
    _refuse_altered(run_dir, verification)
    finished = ledger.finished_count
    # Complete means every planned trial ran and the run signed off; anything less releases
    # nothing: no gate counts as passed and the verdict says "incomplete" (exit 4).
    complete = not verification.problems and finished == manifest.plan.trials
    incomplete = None if complete else _incompleteness(manifest, finished, verification)
    # Evaluability first: the valid-response rate leads every subject's figures, and a subject
    # that mostly failed to answer cannot pass a gate (its error rates are not evidence).
    verdict = apply_evaluability(
        analysis,
        manifest.spec.analysis.min_valid_response_rate,
        manifest.spec.analysis.confidence,
    )
    withhold_not_evaluable(analysis, verdict)  # no estimate of a non-answering subject is shown
    declared = evaluate_subject_gates(list(manifest.spec.gates), analysis.subjects)
    gates = gate_on_evaluability(declared + list(analysis.implicit_gates), verdict)
    if incomplete is not None:
        gates = [withhold_pass(gate, incomplete) for gate in gates]
    isolation = candidate_isolation(run_dir)
    page = ReportPage(
        title=analysis.title,
        subtitle=analysis.subtitle,
        gates=gates,
        sections=[
            *evaluability_blocks(verdict, manifest.spec.analysis.confidence),
            *analysis.sections,
        ],
        manifest=_manifest_summary(manifest, complete, finished),
        qualifications=[
            *subset_qualifications(manifest),
            *analysis.qualifications,
            *(f"Candidate {name}'s code ran under: {mode}." for name, mode in isolation.items()),
        ],
        subjects=list(analysis.subjects),
        instruments=sorted(analysis.instruments),
        expected_to_fail=sorted(analysis.expected_to_fail & analysis.instruments),
        not_run=_not_run(analysis),
        evaluability=dict(analysis.evaluability),
        incomplete=incomplete,
        verdict_note=_with_isolation_note(analysis.verdict_note, isolation),
        system_under_test=_system_under_test(run_dir, manifest, track),
    )
    verdicts = subject_verdicts(page)
    html_target = (out_dir or run_dir) / "report.html"
    # Beside, the page is written while this process writes the record (verified: see above).
    page_written = None if beside is None else beside.ask(write_report_html, html_target, page)
    record = {
        "format": "trustbench.record/1",
        "trustbench_version": __version__,
        "manifest_sha256": manifest.manifest_sha256,
        "suite": manifest.spec.suite,
        "track": manifest.spec.track,
        "complete": complete,
        "planned_trials": manifest.plan.trials,
        "finished_trials": finished,
        # Trials the run re-ran after a cut tail (`run --rerun-cut`): their first results
        # were lost, so a reader weighs these results knowing they are second tries.
        "trials_rerun_after_cut": verification.trials_rerun_after_cut,
        "concurrency": _concurrency_record(manifest, ledger),
        "gates": gates_record(gates),
        "verdicts": {
            v.subject: {"status": v.status, "headline": v.headline, "instrument": v.instrument}
            for v in verdicts
        },
        "evaluability": verdict.record(),
        "figures": {
            subject: [figure.model_dump(mode="json") for figure in figures]
            for subject, figures in analysis.subjects.items()
        },
        "qualifications": [*subset_qualifications(manifest), *analysis.qualifications],
        "system_under_test": page.system_under_test,
        # What each candidate's code ran under (`trustbench.sandbox`), as the run recorded it.
        "candidate_isolation": isolation,
        # Per-trial rows live beside the record (one JSON line each); the record names the
        # file and commits to it by digest, and stays small however long the run.
        "trial_rows": write_trial_rows((out_dir or run_dir) / TRIAL_ROWS_FILE, analysis.trial_rows),
        **analysis.record,
    }
    record_path = write_record_json((out_dir or run_dir) / "record.json", record)
    html_path = (
        beside.answer(page_written)
        if beside is not None and page_written is not None
        else write_report_html(html_target, page)
    )
    if out_dir is None:
        write_record_statement(run_dir, sign_key)  # record.intoto.json: core/_attestation.py
    return ReportResult(
        record_path, html_path, gates, complete, verdicts, incomplete, analysis.summary
    )
