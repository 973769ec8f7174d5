"""The `trustbench trb` command group."""

from __future__ import annotations

import typer

trb_app = typer.Typer(help="Trace AI Reflection Benchmark (TRB).", no_args_is_help=True)
