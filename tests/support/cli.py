"""Invoke the trustbench CLI in-process, mapping trustbench errors to exit codes like `main`."""

from __future__ import annotations

from typer.testing import CliRunner

from trustbench.cli import app
from trustbench.errors import TrustbenchError

ALPHA_KEY = "sk-test-alpha-DO-NOT-LEAK-7f3a9c"
"""API key value the core tests put in $TB_TEST_ALPHA_KEY (and look for in every artifact)."""


def invoke(*args: str) -> tuple[int, str]:
    """Run `trustbench *args`; return (exit code, output or error message)."""
    result = CliRunner().invoke(app, list(args))
    if isinstance(result.exception, TrustbenchError):
        return result.exception.exit_code, str(result.exception)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output
