"""The `trustbench rtb` command group."""

from __future__ import annotations

import typer

rtb_app = typer.Typer(help="Recursive Trust Benchmark (RTB).", no_args_is_help=True)
