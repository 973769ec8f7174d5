"""`trustbench rtb human ...`: serve a frozen human-review run to its participants."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

human_app = typer.Typer(
    help="Human reviewer comparison: a local review app for real participants.",
    no_args_is_help=True,
)


@human_app.callback()
def human() -> None:
    """Human reviewer comparison: serve a frozen run of `human` candidates to its participants."""


@human_app.command()
def serve(
    run_dir: Annotated[
        Path, typer.Argument(help="Run folder frozen from a spec of human candidates.")
    ],
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port (0 = any free port).")] = 8765,
) -> None:
    """Serve the review app; print one private session link per participant; Ctrl-C to stop.

    SIGTERM stops it exactly as Ctrl-C does.

    The app is the ledger's only writer while it serves (`trustbench run` is refused meanwhile).
    Stopping pauses every open case; serving again resumes from the ledger with fresh links.
    """
    from trustbench._local_app import listen_socket, serve_until_stopped
    from trustbench.rtb.human._app import open_session_run

    listening = listen_socket(host, port)  # before anything else: a used port fails at once

    serve_until_stopped(
        listening,
        host,
        open_session_run(run_dir),
        what=str(run_dir),
        stops="Ctrl-C stops and pauses",
    )
    typer.echo("stopped: open cases paused; serve again to resume")
