"""Commands shared by both suites: freeze, run, verify, export-ledger, report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from trustbench.errors import InputError

if TYPE_CHECKING:
    from trustbench.core._report_run import ReportResult
    from trustbench.core._runner import CountingProgress

SpecArg = Annotated[Path, typer.Argument(help="Experiment spec (TOML).")]
RunDirArg = Annotated[Path, typer.Argument(help="Run folder written by `freeze`.")]
OutDirOpt = Annotated[str, typer.Option("--out", help="Run folder to write manifest.json into.")]
OutFileOpt = Annotated[
    str,
    typer.Option(
        "--out",
        help="JSONL file to write (- for standard output; a FIFO or device is streamed to).",
    ),
]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Replace an existing output file (never a run's ledger, ledger.head or manifest).",
    ),
]
INTERRUPTED_EXIT = 130
"""Exit code of a run stopped by Ctrl-C (128 + SIGINT, as a shell reports it)."""
QuietOpt = Annotated[bool, typer.Option("--quiet", help="No progress output.")]
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print a compact JSON summary on stdout instead of text (verdict per candidate, "
        "gates, evaluability, record path); the exit code is the same.",
    ),
]
ExecutorOpt = Annotated[
    str,
    typer.Option(
        "--executor",
        help="Where trials run: `local` (this process) or `ray` (Ray workers; the ledger is "
        "still written only here). `ray` needs the `ray` extra.",
    ),
]
LimitOpt = Annotated[
    int | None,
    typer.Option(
        "--limit",
        help="Run at most N of the remaining trials (seeded interleaved order) for a quick "
        "check; the rest stay unrun (reported 'not run') and a later `run` resumes them.",
    ),
]
AddressOpt = Annotated[
    str | None,
    typer.Option(
        "--address",
        help="With --executor ray: the Ray cluster to join (`auto`, `ray://HEAD:10001`); "
        "default: start a local Ray instance.",
    ),
]

RerunCutOpt = Annotated[
    bool,
    typer.Option(
        "--rerun-cut",
        help="Resume a ledger whose finished trials were cut off its end (ledger.head counted "
        "them) by running them again, recorded as that decision (record.json: "
        "trials_rerun_after_cut); without it such a ledger is refused, naming them.",
    ),
]
NoPreflightOpt = Annotated[
    bool,
    typer.Option(
        "--no-preflight",
        help="Skip the one small request per API candidate sent alone before the first trial "
        "(model known, key accepted, one request answered within timeout_s, structured output "
        "honoured when declared).",
    ),
]


AllowMissingKeysOpt = Annotated[
    bool,
    typer.Option(
        "--allow-missing-keys",
        help="Freeze even if a candidate's api_key_env variable is unset here (run elsewhere).",
    ),
]


ReasonOpt = Annotated[
    str,
    typer.Option(
        "--reason",
        help="Why an exception the track allows only with a reason is taken (e.g. freezing a "
        "sealed held-out set past its exposure budget); recorded by the track and printed.",
    ),
]


def freeze(
    spec: SpecArg,
    out: OutDirOpt,
    allow_missing_keys: AllowMissingKeysOpt = False,
    reason: ReasonOpt = "",
) -> None:
    """Freeze a spec into RUN_DIR/manifest.json (hashes, versions, seeds, plan)."""
    from trustbench.core._context import unknown_settings
    from trustbench.core._outputs import check_new_run_folder, output_path
    from trustbench.core._track import load_track
    from trustbench.core.spec._manifest import build_manifest, freeze_manifest

    folder = check_new_run_folder(output_path(out))  # before the (slow) freeze, and again there
    manifest = build_manifest(spec, allow_missing_keys=allow_missing_keys)
    track, _ = load_track(manifest.spec.track_id)  # loaded by the freeze: no import here
    for warning in unknown_settings(manifest.spec.candidates, track):
        typer.echo(warning, err=True)
    path, notes = freeze_manifest(manifest, folder, reason)
    typer.echo(
        f"froze {manifest.plan.trials} trials ({manifest.plan.cases} cases x "
        f"{len(manifest.candidates)} candidates x {manifest.spec.trials_per_case}) into {path}"
    )
    typer.echo(f"manifest sha256 {manifest.manifest_sha256}")
    for note in notes:
        typer.echo(f"note: {note}")


RUN_ALL_FAILED_EXIT = 3
"""Exit code of `run` when some candidate failed every one of its trials (e.g. unreachable):
the run finished, but that candidate's results cannot be evidence of anything."""


def _candidates_that_never_completed(run_dir: Path) -> dict[str, str]:
    """Candidate -> error classes, for candidates whose every finished trial failed.

    Counted by SQLite over the trials table: reading the whole ledger back (every attempt's
    request and response decompressed) made this check grow with the run, in memory and time,
    after the run itself had finished (issue 30).
    """
    from trustbench.core.ledger._store import open_for_reading

    connection = open_for_reading(run_dir)
    try:
        never = [
            str(name)
            for name, completed in connection.execute(
                "SELECT candidate, MAX(status = 'completed') FROM trials GROUP BY candidate"
            )
            if not completed
        ]
        return {
            name: ", ".join(
                sorted(
                    {
                        str(error_class or "unknown")
                        for (error_class,) in connection.execute(
                            "SELECT DISTINCT error_class FROM trials WHERE candidate = ?", (name,)
                        )
                    }
                )
            )
            for name in never
        }
    finally:
        connection.close()


def exit_interrupted(progress: CountingProgress, resume: str) -> NoReturn:
    """Say how far a run stopped by Ctrl-C got and the command that resumes it; exit 130.

    Every finished trial is in the ledger, so the resume command runs only the rest.
    """
    typer.echo(
        f"interrupted: {progress.done}/{progress.total} trials finished and recorded "
        f"({progress.failed} failed); resume with: {resume}",
        err=True,
    )
    raise typer.Exit(INTERRUPTED_EXIT)


def run(
    run_dir: RunDirArg,
    quiet: QuietOpt = False,
    executor: ExecutorOpt = "local",
    address: AddressOpt = None,
    limit: LimitOpt = None,
    no_preflight: NoPreflightOpt = False,
    rerun_cut: RerunCutOpt = False,
) -> None:
    """Run (or resume) the frozen experiment, recording every attempt in the ledger."""
    from trustbench.core._runner import (
        CountingProgress,
        NoProgress,
        default_progress,
        run_experiment,
    )

    progress = CountingProgress(NoProgress() if quiet else default_progress())
    try:
        summary = run_experiment(
            run_dir,
            progress,
            executor=executor,
            address=address,
            limit=limit,
            preflight=not no_preflight,
            rerun_cut=rerun_cut,
        )
    except KeyboardInterrupt:  # the runner closed the progress output; the ledger is intact
        exit_interrupted(progress, f"trustbench run {run_dir}")
    finished = summary.finished_before + summary.completed + summary.failed
    typer.echo(
        f"{finished}/{summary.planned} trials finished ({summary.finished_before} before this "
        f"run); this run: {summary.completed} completed, {summary.failed} failed, "
        f"{summary.attempts} attempts ({summary.transport_retries} transport retries), "
        f"{summary.abandoned_executions} interrupted executions marked abandoned"
    )
    for note in summary.notes:
        typer.echo(f"note: {note}")
    for name, why in summary.stopped.items():
        typer.echo(f"candidate {name!r} stopped: {why}", err=True)
    dead = _candidates_that_never_completed(run_dir)
    for name, classes in dead.items():
        typer.echo(f"candidate {name!r} failed every trial ({classes}): not evaluable", err=True)
    if dead:
        raise typer.Exit(RUN_ALL_FAILED_EXIT)


RecordOpt = Annotated[
    bool,
    typer.Option(
        "--record",
        help="Also check record.intoto.json against record.json, report.html, the manifest and "
        "the ledger head.",
    ),
]
PublicKeyOpt = Annotated[
    Path | None,
    typer.Option(
        "--public-key",
        help="With --record: the signer's Ed25519 public key (KEY.pub from `trustbench keygen`); "
        "the record must carry a signature that verifies under it (unsigned is refused).",
    ),
]


def verify(run_dir: RunDirArg, record: RecordOpt = False, public_key: PublicKeyOpt = None) -> None:
    """Recompute the manifest hash and the ledger chain; exit 1 naming the first bad row."""
    from trustbench.core._verify import verify_run
    from trustbench.errors import CheckFailed, InputError

    if public_key is not None and not record:
        raise InputError("--public-key checks the signed record: give --record too")
    report = verify_run(run_dir)
    if not report.ok:
        raise CheckFailed(report.problems[0], location=str(run_dir / "ledger.sqlite"))
    typer.echo(
        f"intact: manifest {report.manifest_sha256[:12]}…, {report.rows} ledger rows chained, "
        f"{report.finished_trials}/{report.planned_trials} trials finished"
    )
    if report.trials_rerun_after_cut:
        typer.echo(
            f"note: {report.trials_rerun_after_cut} trials were run again after finished trials "
            "were cut off the ledger's end (`run --rerun-cut`, recorded in the ledger)"
        )
    if record:
        from trustbench.core._attestation import require_record

        checked = require_record(run_dir, public_key)
        if checked.signing == "ed25519":
            signing = f"Ed25519 signature by keyid {checked.keyid} verified under {public_key}"
        elif checked.signing == "not checked":
            signing = (
                f"signed (keyid {checked.keyid}) but the signature was NOT CHECKED: give "
                "--public-key KEY.pub to check it"
            )
        else:
            signing = (
                "UNSIGNED: it detects accidental changes, not a deliberate rewrite (sign with "
                "`report --sign-key`)"
            )
        typer.echo(
            "record: record.json, report.html, manifest and ledger head match "
            f"record.intoto.json; {signing}"
        )


def export_ledger(run_dir: RunDirArg, out: OutFileOpt, force: ForceOpt = False) -> None:
    """Export every ledger row as JSON lines (chain order) for other analysis tools.

    `--out -` (or a FIFO, a device, `/dev/stdout`) streams the rows and is never replaced; when
    they go to standard output, the line saying how many were written goes to standard error,
    so a pipe receives rows only.
    """
    from trustbench.core._export import export_ledger as export
    from trustbench.core._outputs import check_output_file, is_standard_output, output_path

    path = check_output_file(output_path(out), force=force)
    to_stdout = is_standard_output(path)  # before writing: a FIFO's reader may be gone after
    count = export(run_dir, path)
    typer.echo(f"wrote {count} rows to {path}", err=to_stdout)


def _console_notes(record_path: Path) -> list[str]:
    """The lines a track asked the console to show (`console_notes` in record.json)."""
    import json

    notes = json.loads(record_path.read_text()).get("console_notes")
    return [str(n) for n in notes] if isinstance(notes, list) else []


SignKeyOpt = Annotated[
    Path | None,
    typer.Option(
        "--sign-key",
        help="Sign record.intoto.json with this Ed25519 private key (from `trustbench keygen`): "
        "a DSSE envelope that `verify --record --public-key KEY.pub` checks.",
    ),
]


HeldoutKeyOpt = Annotated[
    Path | None,
    typer.Option(
        "--heldout-key",
        help="The owner's X25519 private key file of a sealed held-out corpus (else "
        "$TRUSTBENCH_HELDOUT_KEY): grading a run against a sealed set needs it.",
    ),
]
HELDOUT_KEY_ENV = "TRUSTBENCH_HELDOUT_KEY"
"""Where a track reads a sealed corpus's key from (core only hands the file's path on)."""


def report(
    run_dir: RunDirArg,
    json_summary: JsonOpt = False,
    sign_key: SignKeyOpt = None,
    heldout_key: HeldoutKeyOpt = None,
) -> None:
    """Grade the run from its ledger; write record.json and report.html; exit 1 on a failed gate."""
    import os

    if heldout_key is not None:
        if not heldout_key.is_file():
            raise InputError("the held-out key file does not exist", location=str(heldout_key))
        os.environ[HELDOUT_KEY_ENV] = str(heldout_key.resolve())

    from trustbench.core._attestation import REMOVED_KEY_ENV
    from trustbench.core._report_run import report_run

    if os.environ.get(REMOVED_KEY_ENV):
        raise InputError(
            f"${REMOVED_KEY_ENV} is set, but the HMAC record signature was removed (whoever can "
            "check a shared secret can forge it): unset it and sign with --sign-key KEY "
            "(`trustbench keygen KEY`)"
        )
    report_exit(report_run(run_dir, sign_key=sign_key), json_summary=json_summary)


def report_exit(result: ReportResult, *, json_summary: bool = False) -> None:
    """Print a report's gate lines (or its JSON summary) and exit as `report` does.

    Shared by `report` and the quick paths (`rtb review --model`), so both say and exit alike:
    4 for an incomplete run, 1 for a failed gate, else 0.
    """
    from trustbench.core._attestation import STATEMENT_FILE, statement_signing

    if json_summary:
        import json

        from trustbench.core.report import report_summary

        typer.echo(json.dumps(report_summary(result), indent=2, sort_keys=True))
    else:
        for gate in sorted(result.gates, key=lambda g: g.status == "passed"):
            typer.echo(gate.console_line())
        for line in _console_notes(result.record_path):
            typer.echo(f"note: {line}")
        typer.echo(f"wrote {result.record_path} and {result.html_path}")
        typer.echo(f"wrote {STATEMENT_FILE} ({statement_signing(result.record_path.parent)})")
    release_exit(result, finish="finish it with `trustbench run` and report again")


def release_exit(result: ReportResult, *, finish: str) -> None:
    """Exit 4 for an incomplete run (saying `finish`: how to complete it), 1 for a failed gate.

    Every command that reports a run (`report`, the quick paths, `trb run`) ends here, so an
    incomplete or gated run never exits 0, and all say so alike.

    Raises:
        CheckFailed: A blocking release gate did not pass.
    """
    from trustbench.core.report._verdict import INCOMPLETE_EXIT
    from trustbench.errors import CheckFailed

    if not result.complete:
        typer.echo(
            f"run incomplete: {result.incomplete}; nothing is released (exit {INCOMPLETE_EXIT}): "
            + finish,
            err=True,
        )
        raise typer.Exit(INCOMPLETE_EXIT)
    if result.blocked:
        failed = [g.spec.label for g in result.gates if g.blocks]
        raise CheckFailed(f"release gate(s) not passed: {', '.join(failed)}")


def keygen(
    out: Annotated[str, typer.Argument(help="Private key file to write (KEY.pub beside it).")],
    force: ForceOpt = False,
) -> None:
    """Make an Ed25519 key pair for signing records: KEY (private, 0600) and KEY.pub."""
    from trustbench.core._outputs import check_output_file, output_path
    from trustbench.core._signing import generate_key_pair

    private = check_output_file(output_path(out, "KEY"), force=force, option="KEY", streams=False)
    public = check_output_file(
        private.with_name(private.name + ".pub"), force=force, option="KEY", streams=False
    )
    keyid = generate_key_pair(private, public)
    typer.echo(f"wrote {private} (private: keep it secret) and {public} (share it)")
    typer.echo(f"keyid {keyid}")


def register_core_commands(app: typer.Typer) -> None:
    """Attach the suite-independent commands to the top-level app."""
    app.command()(keygen)
    app.command()(freeze)
    app.command()(run)
    app.command()(verify)
    app.command("export-ledger")(export_ledger)
    app.command()(report)
