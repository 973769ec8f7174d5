"""Commands shared by both suites: freeze, run, verify, export-ledger, report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

SpecArg = Annotated[Path, typer.Argument(help="Experiment spec (TOML).")]
RunDirArg = Annotated[Path, typer.Argument(help="Run folder written by `freeze`.")]
OutDirOpt = Annotated[Path, typer.Option("--out", help="Run folder to write manifest.json into.")]
OutFileOpt = Annotated[Path, typer.Option("--out", help="JSONL file to write.")]
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

NoPreflightOpt = Annotated[
    bool,
    typer.Option(
        "--no-preflight",
        help="Skip the one small request per API candidate sent before the first trial "
        "(model known, key accepted, structured output honoured when declared).",
    ),
]


AllowMissingKeysOpt = Annotated[
    bool,
    typer.Option(
        "--allow-missing-keys",
        help="Freeze even if a candidate's api_key_env variable is unset here (run elsewhere).",
    ),
]


def freeze(spec: SpecArg, out: OutDirOpt, allow_missing_keys: AllowMissingKeysOpt = False) -> None:
    """Freeze a spec into RUN_DIR/manifest.json (hashes, versions, seeds, plan)."""
    from trustbench.core._manifest import build_manifest, write_manifest
    from trustbench.errors import InputError

    if out.exists() and not out.is_dir():
        raise InputError("--out must be a run folder, not a file", location=str(out))
    manifest = build_manifest(spec, allow_missing_keys=allow_missing_keys)
    path = write_manifest(manifest, out)
    typer.echo(
        f"froze {manifest.plan.trials} trials ({manifest.plan.cases} cases x "
        f"{len(manifest.candidates)} candidates x {manifest.spec.trials_per_case}) into {path}"
    )
    typer.echo(f"manifest sha256 {manifest.manifest_sha256}")


RUN_ALL_FAILED_EXIT = 3
"""Exit code of `run` when some candidate failed every one of its trials (e.g. unreachable):
the run finished, but that candidate's results cannot be evidence of anything."""


def _candidates_that_never_completed(run_dir: Path) -> dict[str, str]:
    """Candidate -> error classes, for candidates whose every finished trial failed."""
    from trustbench.core._export import read_ledger

    trials: dict[str, list[dict[str, object]]] = {}
    for trial in read_ledger(run_dir).trials:
        trials.setdefault(str(trial["candidate"]), []).append(trial)
    return {
        name: ", ".join(sorted({str(t.get("error_class") or "unknown") for t in rows}))
        for name, rows in trials.items()
        if all(t["status"] != "completed" for t in rows)
    }


def run(
    run_dir: RunDirArg,
    quiet: QuietOpt = False,
    executor: ExecutorOpt = "local",
    address: AddressOpt = None,
    limit: LimitOpt = None,
    no_preflight: NoPreflightOpt = False,
) -> None:
    """Run (or resume) the frozen experiment, recording every attempt in the ledger."""
    from trustbench.core._progress import NoProgress, default_progress
    from trustbench.core._runner import run_experiment

    summary = run_experiment(
        run_dir,
        NoProgress() if quiet else default_progress(),
        executor=executor,
        address=address,
        limit=limit,
        preflight=not no_preflight,
    )
    finished = summary.finished_before + summary.completed + summary.failed
    typer.echo(
        f"{finished}/{summary.planned} trials finished ({summary.finished_before} before this "
        f"run); this run: {summary.completed} completed, {summary.failed} failed, "
        f"{summary.attempts} attempts ({summary.transport_retries} transport retries), "
        f"{summary.abandoned_executions} interrupted executions marked abandoned"
    )
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
        "the ledger head (and its HMAC when signed; the key is read from $TRUSTBENCH_RECORD_KEY).",
    ),
]


def verify(run_dir: RunDirArg, record: RecordOpt = False) -> None:
    """Recompute the manifest hash and the ledger chain; exit 1 naming the first bad row."""
    from trustbench.core._verify import verify_run
    from trustbench.errors import CheckFailed

    report = verify_run(run_dir)
    if not report.ok:
        raise CheckFailed(report.problems[0], location=str(run_dir / "ledger.sqlite"))
    typer.echo(
        f"intact: manifest {report.manifest_sha256[:12]}…, {report.rows} ledger rows chained, "
        f"{report.finished_trials}/{report.planned_trials} trials finished"
    )
    if record:
        from trustbench.core._attestation import require_record

        checked = require_record(run_dir)
        typer.echo(
            "record: record.json, report.html, manifest and ledger head match "
            + (
                "record.intoto.json; HMAC-SHA256 (shared-secret) signature valid"
                if checked.signing == "hmac-sha256"
                else "record.intoto.json, which is UNSIGNED (no $TRUSTBENCH_RECORD_KEY when "
                "written): it detects accidental changes, not a deliberate rewrite"
            )
        )


def export_ledger(run_dir: RunDirArg, out: OutFileOpt) -> None:
    """Export every ledger row as JSON lines (chain order) for other analysis tools."""
    from trustbench.core._export import export_ledger as export

    count = export(run_dir, out)
    typer.echo(f"wrote {count} rows to {out}")


def _console_notes(record_path: Path) -> list[str]:
    """The lines a track asked the console to show (`console_notes` in record.json)."""
    import json

    notes = json.loads(record_path.read_text()).get("console_notes")
    return [str(n) for n in notes] if isinstance(notes, list) else []


def report(run_dir: RunDirArg, json_summary: JsonOpt = False) -> None:
    """Grade the run from its ledger; write record.json and report.html; exit 1 on a failed gate."""
    from trustbench.core._report_run import report_run
    from trustbench.errors import CheckFailed

    result = report_run(run_dir)
    from trustbench.core._attestation import STATEMENT_FILE, statement_signing

    if json_summary:
        import json

        from trustbench.core.report import report_summary

        typer.echo(json.dumps(report_summary(result), indent=2, sort_keys=True))
    else:
        for gate in sorted(result.gates, key=lambda g: g.status == "passed"):
            typer.echo(f"gate {gate.status.upper()}: {gate.spec.label}: {gate.reason}")
        if not result.complete:
            typer.echo("note: the run was interrupted; unrun trials are reported as not run")
        for line in _console_notes(result.record_path):
            typer.echo(f"note: {line}")
        typer.echo(f"wrote {result.record_path} and {result.html_path}")
        typer.echo(f"wrote {STATEMENT_FILE} ({statement_signing(run_dir)})")
    if result.blocked:
        failed = [g.spec.label for g in result.gates if g.status != "passed"]
        raise CheckFailed(f"release gate(s) not passed: {', '.join(failed)}")


def register_core_commands(app: typer.Typer) -> None:
    """Attach the suite-independent commands to the top-level app."""
    app.command()(freeze)
    app.command()(run)
    app.command()(verify)
    app.command("export-ledger")(export_ledger)
    app.command()(report)
