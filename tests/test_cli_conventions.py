"""CLI conventions: `--version`, option types in `--help` shown as what they are, and a
"did you mean" for a misspelt spec key, track id, reviewer or boundary."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from tests.support.cli import invoke
from typer.testing import CliRunner

from trustbench import __version__
from trustbench.cli import app

EXPERIMENTS = Path(__file__).parents[1] / "src" / "trustbench" / "rtb" / "experiments"


def _help(*argv: str) -> str:
    result = CliRunner().invoke(app, [*argv, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


def _option_line(page: str, option: str) -> str:
    found = re.search(rf"^\s+{re.escape(option)}\b.*$", page, re.MULTILINE)
    assert found, f"{option} not in:\n{page}"
    return found.group(0)


def test_version_option_prints_the_package_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"trustbench {__version__}"
    assert "--version" in _help()


@pytest.mark.parametrize(
    ("argv", "option", "shown"),
    [
        (("run",), "--limit", "<int>"),
        (("run",), "--executor", "<str>"),
        (("report",), "--sign-key", "<path>"),
        (("rtb", "human", "serve"), "--port", "<int>"),
        (("rtb", "human", "serve"), "--host", "<str>"),
        (("demo",), "--out", "<str>"),
        (("trb", "run"), "--model", "<str>"),
        (("trb", "run"), "--base-url", "<str>"),
    ],
)
def test_an_option_that_takes_a_value_shows_its_type(
    argv: tuple[str, ...], option: str, shown: str
) -> None:
    assert _option_line(_help(*argv), option).split()[:2] == [option, shown]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [(("run",), "--quiet"), (("run",), "--no-preflight"), (("report",), "--json"), ((), "--help")],
)
def test_a_flag_shows_no_type(argv: tuple[str, ...], flag: str) -> None:
    line = _option_line(_help(*argv), flag)
    assert "<" not in line.split(flag, 1)[1].split("  ", 1)[0], line
    assert "<bool>" not in line


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command path under a group (typer's groups are click-like: `.commands`)."""
    for name, command in group.commands.items():
        yield (*path, name)
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))


def test_no_help_page_shows_bool_beside_a_flag() -> None:
    root = typer.main.get_command(app)
    pages = {argv: _help(*argv) for argv in _commands(root)}
    assert len(pages) > 20
    assert [argv for argv, page in pages.items() if "<bool>" in page] == []


def _frozen(tmp_path: Path, source: str, old: str, new: str) -> tuple[int, str]:
    spec = tmp_path / "spec.toml"
    text = (EXPERIMENTS / source).read_text()
    assert old in text
    spec.write_text(text.replace(old, new, 1))
    return invoke("freeze", str(spec), "--out", str(tmp_path / "run"))


@pytest.mark.parametrize(
    ("source", "old", "new", "expected"),
    [
        (
            "demo_review.toml",
            "transport_max_retries",
            "transport_max_retires",
            "spec.toml#/retry/transport_max_retires: Extra inputs are not permitted; "
            "did you mean 'transport_max_retries'?",
        ),
        (
            "demo_review.toml",
            "trials_per_case",
            "trials_per_cases",
            "did you mean 'trials_per_case'?",
        ),
        (
            "demo_review.toml",
            'kind = "inprocess"',
            'knid = "inprocess"',
            "#/candidates/0/knid: Extra inputs are not permitted; did you mean 'kind'?",
        ),
        ("demo_review.toml", 'track = "review"', 'track = "reveiw"', "did you mean 'rtb/review'?"),
        (
            "demo_review.toml",
            'reviewer = "always-permit"',
            'reviewer = "allways-permit"',
            "unknown reviewer 'allways-permit'; did you mean 'always-permit'?",
        ),
        (
            "demo_control.toml",
            'boundary = "reference"',
            'boundary = "refrence"',
            "unknown boundary 'refrence'; did you mean 'reference'?",
        ),
    ],
)
def test_a_misspelt_name_is_answered_with_the_closest_known_one(
    tmp_path: Path, source: str, old: str, new: str, expected: str
) -> None:
    code, message = _frozen(tmp_path, source, old, new)
    assert code == 2
    assert expected in message


def test_a_name_close_to_nothing_gets_no_suggestion(tmp_path: Path) -> None:
    code, message = _frozen(tmp_path, "demo_review.toml", "trials_per_case", "zzqx")
    assert code == 2
    assert "Extra inputs are not permitted" in message and "did you mean" not in message
