"""Every command's outputs: never over a run's evidence, never through a link, never `""`.

The empty-path test walks the whole command tree, so a command added later with an `--out` or
`--html` option (or an `OUT` argument) is held to the same rule without a new test.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from tests.core import test_outputs_never_overwrite_evidence as evidence_tests
from tests.support.cli import invoke

from trustbench.cli import app
from trustbench.rtb.heldout._crypto import new_key_pair
from trustbench.rtb.heldout._seal import seal_corpus

finished = evidence_tests.finished
run_dir = evidence_tests.run_dir
"""The finished run and its per-test copy, shared with the evidence tests (fixtures)."""
_snapshot = evidence_tests._snapshot  # pyright: ignore[reportPrivateUsage]

EVIDENCE = ("ledger.sqlite", "ledger.head", "manifest.json")
REPORT_OUTPUTS = ("report.html", "record.json", "record.trials.jsonl")
"""What `report` writes besides `record.intoto.json` (which it reads first: a foreign one is
refused as an alteration before anything is written)."""
HELDOUT_FIXTURE = Path(__file__).parent / "rtb" / "fixtures" / "rtb_v0_2_user"
OUTPUT_OPTIONS = {"--out", "--html"}
"""Options that name a file or folder a command writes (arguments: named `OUT`)."""


@pytest.fixture
def sealed(tmp_path: Path) -> tuple[Path, Path]:
    private, public = new_key_pair()
    key = tmp_path / "owner.key"
    key.write_text(private)
    folder = tmp_path / "set"
    seal_corpus(HELDOUT_FIXTURE, public, folder, budget=2, set_id="hs-test", at="2026-12-01")
    return folder, key


@pytest.mark.parametrize("name", EVIDENCE)
def test_heldout_report_html_never_writes_over_a_runs_evidence(
    run_dir: Path, sealed: tuple[Path, Path], name: str
) -> None:
    folder, key = sealed
    before = _snapshot(run_dir)
    code, message = invoke(
        "rtb", "heldout", "report", str(folder), "--key", str(key), "--html", str(run_dir / name)
    )
    assert code == 2 and "evidence" in message and "--html" in message, message
    assert _snapshot(run_dir) == before


def test_heldout_report_html_replaces_an_existing_file_only_with_force(
    sealed: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, key = sealed
    page = tmp_path / "set.html"
    page.write_text("keep me")
    base = ("rtb", "heldout", "report", str(folder), "--key", str(key), "--html", str(page))
    code, message = invoke(*base)
    assert code == 2 and "existing file" in message and page.read_text() == "keep me"
    code, output = invoke(*base, "--force")
    assert code == 0, output
    assert page.read_text() != "keep me"


@pytest.mark.parametrize("name", REPORT_OUTPUTS)
def test_report_replaces_a_link_at_its_output_rather_than_writing_through_it(
    run_dir: Path, tmp_path: Path, name: str
) -> None:
    other = tmp_path / "other-run-ledger.sqlite"
    shutil.copyfile(run_dir / "ledger.sqlite", other)
    before = other.read_bytes()
    (run_dir / name).unlink(missing_ok=True)
    (run_dir / name).symlink_to(other)
    code, output = invoke("report", str(run_dir))
    assert code in {0, 1}, output
    assert other.read_bytes() == before
    assert not (run_dir / name).is_symlink() and (run_dir / name).stat().st_size > 0


def test_report_never_writes_through_a_link_planted_at_a_temporary_name(
    run_dir: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other-run-ledger.sqlite"
    shutil.copyfile(run_dir / "ledger.sqlite", other)
    before = other.read_bytes()
    (run_dir / "record.intoto.json.tmp").symlink_to(other)  # the name it once always used
    code, output = invoke("report", str(run_dir))
    assert code in {0, 1}, output
    assert other.read_bytes() == before


@pytest.mark.parametrize(
    "command",
    [
        ("demo", "--out", "RUN"),
        ("export-inspect", "RUN", "--out", "RUN"),
        ("export-inspect", "RUN", "--out", "RUN/ledger.sqlite-wal"),
        ("rtb", "export", "--out", "RUN/record.json"),
        ("demo", "--out", "RUN/ledger.sqlite-journal"),
    ],
)
def test_a_folder_output_that_is_a_run_folder_or_takes_a_run_files_name_is_refused(
    run_dir: Path, command: tuple[str, ...]
) -> None:
    before = sorted(p.name for p in run_dir.iterdir())
    args = [a.replace("RUN", str(run_dir)) for a in command]
    code, message = invoke(*args)
    assert code == 2 and "run folder" in message, message
    assert sorted(p.name for p in run_dir.iterdir()) == before


@pytest.mark.parametrize("name", ["ledger.head", "ledger.sqlite-wal", "record.json"])
def test_freeze_refuses_a_run_folder_taking_the_name_of_another_runs_file(
    finished: Path, tmp_path: Path, name: str
) -> None:
    spec = finished.parent / "run.toml"  # the finished run's own spec, beside its corpus
    frozen = tmp_path / "frozen"  # frozen, not run: none of the run's files exists yet
    assert invoke("freeze", str(spec), "--out", str(frozen))[0] == 0
    code, message = invoke("freeze", str(spec), "--out", str(frozen / name))
    assert code == 2 and f"run folder's {name}" in message, message
    assert sorted(p.name for p in frozen.iterdir()) == ["manifest.json"]


def test_an_export_into_a_subfolder_of_the_run_leaves_the_evidence_as_it_was(
    run_dir: Path,
) -> None:
    evidence = {n: (run_dir / n).read_bytes() for n in ("manifest.json", "ledger.sqlite")}
    code, output = invoke("rtb", "export", "--out", str(run_dir / "exported"))
    assert code == 0, output
    assert (run_dir / "exported" / "inputs").is_dir()
    assert {n: (run_dir / n).read_bytes() for n in evidence} == evidence


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every (command path, command) under a group, suite groups included."""
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


def _label(param: Any) -> str:
    """How help names a parameter: its first option, or an argument's metavar (else NAME)."""
    if param.param_type_name == "argument":
        return (param.metavar or param.name).upper()
    return param.opts[0]


def _is_output(param: Any) -> bool:
    return _label(param) == "OUT" or bool(OUTPUT_OPTIONS & set(param.opts))


def _output_cases() -> list[Any]:
    root = typer.main.get_command(app)
    return [
        pytest.param(path, param.name, id=f"{' '.join(path)} {_label(param)}")
        for path, command in _commands(root)
        for param in command.params
        if _is_output(param)
    ]


def _argv(path: tuple[str, ...], target: str, placeholder: Path) -> list[str]:
    """`path` with "" for the output `target` and a harmless value for every other required."""
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    positional: list[str] = []
    options: list[str] = []
    for param in command.params:
        if param.name != target and not param.required:
            continue
        value = (
            ""
            if param.name == target
            else "openai/m"
            if param.name == "model"
            else str(placeholder)
        )
        if param.param_type_name == "argument":
            positional.append(value)
        else:
            options += [param.opts[0], value]
    return [*path, *positional, *options]


def test_every_command_names_its_outputs_so_the_empty_path_test_covers_them() -> None:
    found = {(" ".join(case.values[0]), case.values[1]) for case in _output_cases()}
    assert len(found) >= 18, sorted(found)
    assert ("rtb heldout report", "html_text") in found and ("trb corpus", "out_text") in found


@pytest.mark.parametrize(("path", "target"), _output_cases())
def test_every_output_option_refuses_an_empty_path_in_one_line(
    path: tuple[str, ...], target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # were "" taken as the working folder, nothing lands elsewhere
    code, message = invoke(*_argv(path, target, tmp_path / "missing"))
    assert code == 2 and "is empty" in message and "\n" not in message.strip(), message
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_report_outputs_get_an_ordinary_new_files_mode(run_dir: Path) -> None:
    umask = os.umask(0o022)
    os.umask(umask)
    code, output = invoke("report", str(run_dir))
    assert code in (0, 1), output
    for name in REPORT_OUTPUTS:
        assert (run_dir / name).stat().st_mode & 0o777 == 0o666 & ~umask, name
