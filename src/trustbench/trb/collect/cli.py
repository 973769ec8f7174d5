"""`trustbench trb collect ...`: freeze a paired counterfactual protocol, serve it, export it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

collect_app = typer.Typer(
    help="Paired counterfactual collection: real human continuations for Tracks 1 and 3.",
    no_args_is_help=True,
)


@collect_app.command()
def freeze(
    protocol: Annotated[Path, typer.Argument(help="Collection protocol TOML file.")],
    out_text: Annotated[str, typer.Option("--out", help="New collection folder.")],
) -> None:
    """Freeze a protocol: resolve its items against the source corpus and pin them by hash."""
    from trustbench.core import check_output_folder, output_path
    from trustbench.trb.collect._store import freeze_protocol

    out = check_output_folder(output_path(out_text))
    frozen = freeze_protocol(protocol, out)
    typer.echo(f"froze protocol {frozen.protocol_sha256} into {out}")
    for p in frozen.protocol.participants:
        typer.echo(f"  {p.id}: split {p.split}, {len(frozen.items_for(p.split))} items")


@collect_app.command()
def serve(
    folder: Annotated[Path, typer.Argument(help="Collection folder (from `collect freeze`).")],
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port (0 = any free port).")] = 8766,
) -> None:
    """Serve the sessions; print one private link per participant; Ctrl-C or SIGTERM stops.

    Every answer is in the ledger when its page is answered: stopping loses nothing, and
    serving again resumes each session at its next unanswered item (with fresh links).
    """
    from trustbench._local_app import listen_socket, serve_until_stopped
    from trustbench.trb.collect._app import CollectionRun

    listening = listen_socket(host, port)  # before the folder is opened: a used port fails at once

    serve_until_stopped(
        listening, host, CollectionRun(folder), what=str(folder), stops="Ctrl-C stops"
    )
    typer.echo("stopped; serve again to resume")


@collect_app.command()
def export(
    folder: Annotated[Path, typer.Argument(help="Collection folder.")],
    out_text: Annotated[str, typer.Option("--out", help="New folder for the human corpus.")],
) -> None:
    """Write the collected continuations as a TRB corpus (`human/`, `synthetic/`) and a report.

    `OUT/human` holds human Phi(r') where collected; `OUT/synthetic` the same traces with the
    synthetic-only continuations, so Tracks 1 and 3 can be run on both and read side by side.
    A world with its own slots writes `OUT/sessions.jsonl` instead, for `trb import --world`.
    """
    from trustbench.core import check_output_folder, output_path
    from trustbench.trb.collect._export import export_collection, summary_lines

    out = check_output_folder(output_path(out_text))
    report = export_collection(folder, out)
    for line in summary_lines(report):
        typer.echo(line)
    written = ["sessions.jsonl"] if "session_file" in report else ["human", "synthetic"]
    typer.echo(f"wrote {', '.join(str(out / w) for w in written)} and {out / 'collection.json'}")
