"""The `trustbench` command line.

Subcommands are defined next to the code they drive and only assembled here:
`trustbench.rtb.cli` (the `rtb` group), `trustbench.trb.cli` (the `trb` group) and
`trustbench.core.cli` (freeze / run / verify / report, shared by both suites) and
`trustbench.interop.cli` (export-inspect / import-inspect).

The two suite groups are imported when a command line names them (or a help page lists them):
`trustbench run` does not pay for every suite's commands and what they import (issue 35).
"""

from __future__ import annotations

import atexit
import gc
import sqlite3
import sys

import typer

from trustbench import __version__
from trustbench._lazy_commands import CLI_SETTINGS, lazy_group
from trustbench.core.cli import register_core_commands
from trustbench.errors import TrustbenchError
from trustbench.interop.cli import register_interop_commands

_SUITE_GROUPS = {"rtb": "trustbench.rtb.cli:rtb_app", "trb": "trustbench.trb.cli:trb_app"}
"""Suite command groups, after the top-level commands, built on first use."""

app = typer.Typer(
    name="trustbench",
    help="Measure whether an AI system's safeguards and stated reasoning govern what happens.",
    no_args_is_help=True,
    cls=lazy_group(_SUITE_GROUPS),
    **CLI_SETTINGS,
)


VERSION_LINE = f"trustbench {__version__}"
"""What `--version` and `version` print: one string, so a script reading either reads the same."""


def _print_version(value: bool) -> None:
    if value:
        typer.echo(VERSION_LINE)
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the trustbench version and exit.",
    ),
) -> None:
    """Measure whether an AI system's safeguards and stated reasoning govern what happens."""


register_core_commands(app)
register_interop_commands(app)


@app.command()
def version() -> None:
    """Print the trustbench version (as `--version` does)."""
    typer.echo(VERSION_LINE)


@app.command()
def demo(
    out: str | None = typer.Option(
        None,
        help="Run folder to write into (default: ./trustbench-demo/, or the next free "
        "./trustbench-demo-N/ when an earlier demo is there).",
    ),
    verbose: bool = typer.Option(
        False, "--verbose", help="Also print the corpus and audit tables and each step's notes."
    ),
) -> None:
    """Run the built-in demonstration on defaults: no network, no API keys."""
    from trustbench.demo import run_demo

    run_demo(out, verbose=verbose)


def main() -> None:
    """Console entry point: run the app, turning trustbench errors into messages and exit codes.

    Input the code did not foresee (a path that is a folder or a file where the other was meant,
    an unreadable file, JSON nested too deep to parse, a damaged SQLite file) is still bad input:
    one line and exit 2 (1 for a damaged ledger, a failed check), never a traceback.
    """
    atexit.unregister(_no_collection_at_exit)  # once, however often main runs in a process
    atexit.register(_no_collection_at_exit)
    try:
        app()
    except TrustbenchError as error:
        _fail(str(error), error.exit_code)
    except OSError as error:
        where = f"{error.filename}: " if error.filename else ""
        _fail(f"{where}{error.strerror or type(error).__name__}", 2)
    except RecursionError:
        _fail("the input is nested too deeply to read", 2)
    except sqlite3.DatabaseError as error:
        _fail(f"ledger.sqlite is corrupted or not a SQLite ledger: {error}", 1)


def _no_collection_at_exit() -> None:
    """Let the process end without a last full collection of everything the command made.

    Everything alive at exit dies with the process; the interpreter's final collections still
    walk it all: 0.2 to 0.5 s after a 2,000-trial run (issue 35), longer than the bare client
    takes to start. Frozen objects are skipped; every file and ledger is closed by then.
    """
    gc.disable()
    gc.freeze()


def _fail(message: str, exit_code: int) -> None:
    from rich.console import Console  # only on the error path: never a start-up cost
    from rich.text import Text

    # The message is data (it may hold `[brackets]`): never parse it as rich markup.
    Console(stderr=True, soft_wrap=True).print(
        "[bold red]error:[/]", Text(message), highlight=False
    )
    sys.exit(exit_code)
