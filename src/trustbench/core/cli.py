"""Commands shared by both suites: freeze, run, verify, report."""

from __future__ import annotations

import typer


def register_core_commands(app: typer.Typer) -> None:
    """Attach the suite-independent commands to the top-level app."""
