"""`trustbench rtb human ...`: serve a frozen human-review run to its participants."""

from __future__ import annotations

import contextlib
import signal
import socket
import sys
from pathlib import Path
from typing import Annotated

import typer

human_app = typer.Typer(
    help="Human reviewer comparison: a local review app for real participants.",
    no_args_is_help=True,
)


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket listening on `host:port`, bound before the run is opened.

    A port already in use is then reported at once, with the port and what to do, instead of
    after the session has been set up; the server is handed this very socket (no race).

    Raises:
        InputError: The address cannot be bound (in use, not this machine's, no permission).
    """
    from trustbench.errors import InputError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as error:
        raise InputError(
            f"cannot listen on {host}:{port}: {error.strerror or error}; stop whatever uses "
            f"port {port} or choose another with --port N (--port 0: any free port)",
            location="--port",
        ) from None


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
    listening = listen_socket(host, port)  # before anything else: a used port fails at once

    async def main() -> None:
        with listening, open_session_run(run_dir) as served:
            assert served.app is not None
            runner = web.AppRunner(served.app, access_log=None)
            await runner.setup()
            await web.SockSite(runner, listening).start()
            bound = listening.getsockname()[1]
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
