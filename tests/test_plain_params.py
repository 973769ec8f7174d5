"""The CLI's plain-value conversion gives exactly what typer's own conversion gives.

`trustbench._plain_params` converts the values of plain-kind parameters without building a
pydantic `TypeAdapter` each (issue 35: start-up). Each case parses one command line twice, with
typer's conversion and with the plain one, and compares the values the command receives or the
error typer reports; the plain forms and the forms handed back to typer are both covered.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer._click.exceptions import UsageError

from trustbench._plain_params import plain_parameters


def _command(received: list[Any], *, plain: bool) -> Any:
    app = typer.Typer(add_completion=False)

    @app.command()
    def cmd(
        folder: Annotated[Path, typer.Argument()],
        name: str = "x",
        maybe: str | None = None,
        count: int = 1,
        limit: int | None = None,
        where: Path | None = None,
        existing: Annotated[Path | None, typer.Option(exists=True)] = None,
        flag: bool = False,
    ) -> None:
        received.append((folder, name, maybe, count, limit, where, existing, flag))

    command = typer.main.get_command(app)
    if plain:
        plain_parameters([command])
    return command


def _outcome(arguments: list[str], *, plain: bool) -> tuple[str, Any]:
    received: list[Any] = []
    try:
        _command(received, plain=plain).main(arguments, prog_name="cmd", standalone_mode=False)
    except UsageError as error:
        return "error", error.format_message()
    return "values", received


@pytest.mark.parametrize(
    "arguments",
    [
        ["run"],
        ["./a/b", "--name", "", "--maybe", "m"],
        ["run", "--count", "7", "--limit", "-12"],
        ["run", "--count", "0", "--limit", "0"],
        ["run", "--limit", "1_000"],  # typer's: pydantic reads underscores
        ["run", "--limit", " 7 "],
        ["run", "--limit", "007"],
        ["run", "--limit", "+3"],
        ["run", "--limit", "abc"],
        ["run", "--limit", "99999999999999999999999"],
        ["run", "--count", "1.0"],
        ["run", "--where", "w/x", "--flag"],
        ["run", "--where", ""],
        [""],
        ["run", "--existing", "/nonexistent-folder-of-this-test"],
        ["run", "--existing", "."],
        ["--help"],
    ],
)
def test_plain_conversion_equals_typers(arguments: list[str]) -> None:
    assert _outcome(arguments, plain=True) == _outcome(arguments, plain=False)


def test_a_parameter_typer_converts_itself_keeps_its_converter() -> None:
    received: list[Any] = []
    command = _command(received, plain=True)
    kinds = {param.name: type(param._runtime_param).__name__ for param in command.params}
    assert set(kinds.values()) == {"_PlainValue"}, kinds
    plain_parameters([command])  # a second pass replaces nothing
    assert {param.name: type(param._runtime_param).__name__ for param in command.params} == kinds


def test_trustbench_run_builds_no_type_adapter() -> None:
    """`trustbench run` parses its options without typer's adapter module (nor pydantic for it)."""
    probe = (
        "import sys\n"
        "from trustbench.cli import main\n"
        "sys.argv = ['trustbench', 'run', '/nonexistent-run-folder', '--quiet', '--limit', '3']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as stop:\n"
        "    print(stop.code, 'typer._adapters' in sys.modules)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert completed.stdout.split() == ["2", "False"], completed.stderr
