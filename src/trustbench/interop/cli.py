"""`trustbench export-inspect` and `trustbench import-inspect` (need the `inspect` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def export_inspect(
    run_dir: Annotated[Path, typer.Argument(help="Run folder (reported, for the grades).")],
    out: Annotated[str, typer.Option("--out", help="Folder to write the Inspect logs into.")],
) -> None:
    """Write the run's ledger as Inspect eval logs (one per candidate) for `inspect view`."""
    from trustbench.core import check_output_folder, output_path
    from trustbench.interop._inspect import export_inspect_logs

    written = export_inspect_logs(run_dir, check_output_folder(output_path(out)))
    for path in written:
        typer.echo(f"wrote {path}")
    typer.echo(f"view them with: inspect view --log-dir {out}")


def import_inspect(
    log: Annotated[Path, typer.Argument(help="Inspect log of the rtb_review task (.eval/.json).")],
    export: Annotated[
        Path, typer.Option("--export", help="The `rtb export` folder the task ran on.")
    ],
    out: Annotated[str, typer.Option("--out", help="New run folder to write.")],
    corpus: Annotated[
        Path | None,
        typer.Option(
            "--corpus",
            help="The exported corpus folder (default: the built-in corpus the export was made "
            "from).",
        ),
    ] = None,
) -> None:
    """Turn an Inspect log of `rtb_review` into a run folder; grade it with `trustbench report`."""
    from trustbench.core import output_path
    from trustbench.interop._inspect import import_inspect_log

    run_dir, trials = import_inspect_log(log, export, output_path(out), corpus=corpus)
    typer.echo(f"imported {trials} trials into {run_dir}; grade with: trustbench report {run_dir}")


def register_interop_commands(app: typer.Typer) -> None:
    """Attach the interop commands to the top-level app."""
    app.command("export-inspect")(export_inspect)
    app.command("import-inspect")(import_inspect)
