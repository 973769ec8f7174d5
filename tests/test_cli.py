from typer.testing import CliRunner

from trustbench import __version__
from trustbench.cli import app


def test_version_command_and_option_print_one_and_the_same_version_string() -> None:
    command = CliRunner().invoke(app, ["version"])
    option = CliRunner().invoke(app, ["--version"])
    assert command.exit_code == option.exit_code == 0
    assert command.stdout == option.stdout == f"trustbench {__version__}\n"


def test_help_lists_suite_groups() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "rtb" in result.stdout and "trb" in result.stdout
