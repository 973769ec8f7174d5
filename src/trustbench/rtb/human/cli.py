"""`trustbench rtb human ...`: serve a frozen human-review run to its participants."""

from __future__ import annotations

import contextlib
import signal
import sys
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
    import asyncio

    from aiohttp import web

    from trustbench.errors import InputError
    from trustbench.rtb.human._serve import open_session_run

    if not 0 <= port <= 65535:
        raise InputError(f"--port {port} is not a TCP port (0 to 65535; 0 = any free port)")

    async def main() -> None:
        with open_session_run(run_dir) as served:
            assert served.app is not None
            runner = web.AppRunner(served.app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, host, port)
            await site.start()
            bound = runner.addresses[0][1] if runner.addresses else port
            typer.echo(f"serving {run_dir} on http://{host}:{bound} (Ctrl-C stops and pauses)")
            for candidate, link in sorted(served.links(f"http://{host}:{bound}").items()):
                typer.echo(f"  {candidate}: {link}")
            typer.echo("give each participant only their own link (it is their access token)")
            sys.stdout.flush()
            # SIGTERM (a service manager, `kill`) stops exactly like Ctrl-C: the `with` block
            # closes normally, pausing every open case clock and signing the ledger off.
            stop = asyncio.Event()
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
            try:
                await stop.wait()
            finally:
                await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
    typer.echo("stopped: open cases paused; serve again to resume")
