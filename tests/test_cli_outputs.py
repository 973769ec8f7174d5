"""Every command's outputs: never over a run's evidence, never through a link, never `""`,
never in place of a device, FIFO or descriptor (issue 56: streamed to instead).

The empty-path test walks the whole command tree, so a command added later with an `--out` or
`--html` option (or an `OUT` argument) is held to the same rule without a new test. The stream
tests run the CLI as a subprocess, as the probe that found the issue did, and model
`/dev/stdout` by a link in `tmp_path` to `/proc/self/fd/1`: a test never names the host's own.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import typer
from tests.core import test_outputs_never_overwrite_evidence as evidence_tests
from tests.support.child_env import child_env
from tests.support.cli import invoke

from trustbench.cli import app
from trustbench.core import check_output_file
from trustbench.errors import InputError
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


def _trustbench(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """`python -m trustbench ARGS` in its own process, output piped, this source imported."""
    beside = cwd.with_name(f"{cwd.name}-child")  # HOME and TMPDIR: not among cwd's files
    return subprocess.run(
        [sys.executable, "-m", "trustbench", *args],
        cwd=cwd, capture_output=True, check=False, env=child_env(beside), timeout=120,
    )  # fmt: skip


def _rows(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


def _exported_count(message: bytes) -> int:
    """N from `wrote N rows to PATH`."""
    return int(message.decode().split("wrote ", 1)[1].split(" rows", 1)[0])


def _read_in_background(fifo: Path) -> tuple[threading.Thread, list[bytes]]:
    """A reader of `fifo` on its own thread (what a `consumer` at the pipe's end does)."""
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    return reader, received


def _let_go(reader: threading.Thread, fifo: Path) -> None:
    """End a reader still waiting for a writer (the command failed before opening the FIFO)."""
    if reader.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    reader.join(timeout=30)


@pytest.mark.parametrize("force", [False, True])
def test_export_to_a_fifo_streams_the_rows_to_its_reader_and_keeps_the_fifo(
    run_dir: Path, tmp_path: Path, force: bool
) -> None:
    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    reader, received = _read_in_background(fifo)
    try:
        result = _trustbench(
            "export-ledger", str(run_dir), "--out", str(fifo), *["--force"] * force, cwd=tmp_path
        )
    finally:
        _let_go(reader, fifo)
    assert result.returncode == 0, result.stderr
    rows = _rows(received[0])
    assert rows[0]["table"] == "experiments" and len(rows) == _exported_count(result.stdout)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.fifo", "run"]  # no temporary


def test_export_to_dash_writes_the_rows_to_standard_output(run_dir: Path, tmp_path: Path) -> None:
    result = _trustbench("export-ledger", str(run_dir), "--out", "-", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = _rows(result.stdout)
    assert rows[0]["table"] == "experiments" and len(rows) == _exported_count(result.stderr)
    assert not (tmp_path / "-").exists()


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd (Linux)")
@pytest.mark.parametrize("force", [False, True])
def test_export_through_a_link_to_the_stdout_descriptor_reaches_the_pipe_and_keeps_the_link(
    run_dir: Path, tmp_path: Path, force: bool
) -> None:
    stdout_link = tmp_path / "stdout"  # what /dev/stdout is, without naming the host's own
    stdout_link.symlink_to("/proc/self/fd/1")
    result = _trustbench(
        "export-ledger", str(run_dir), "--out", str(stdout_link), *["--force"] * force,
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = _rows(result.stdout)
    assert rows[0]["table"] == "experiments" and len(rows) == _exported_count(result.stderr)
    assert stdout_link.is_symlink() and os.readlink(stdout_link) == "/proc/self/fd/1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "stdout"]


@pytest.fixture(scope="module")
def reported(finished: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The finished run, reported: it holds record.json, report.html and record.intoto.json."""
    copy = tmp_path_factory.mktemp("reported") / "run"
    shutil.copytree(finished, copy)
    code, output = invoke("report", str(copy))
    assert code in {0, 1} and (copy / "record.intoto.json").is_file(), output
    return copy


@pytest.mark.parametrize("name", ["record.intoto.json", "record.json", "report.html"])
def test_export_over_a_reported_runs_own_file_is_refused_with_force_and_the_run_still_verifies(
    reported: Path, tmp_path: Path, name: str
) -> None:
    run = tmp_path / "run"
    shutil.copytree(reported, run)
    before = _snapshot(run)
    result = _trustbench(
        "export-ledger", str(run), "--out", str(run / name), "--force", cwd=tmp_path
    )
    assert result.returncode == 2, result.stderr
    message = result.stderr.decode()
    assert name in message and "evidence" in message and "Traceback" not in message, message
    assert _snapshot(run) == before
    verified = _trustbench("verify", str(run), cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_heldout_report_html_to_a_fifo_streams_the_page_and_keeps_the_fifo(
    sealed: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, key = sealed
    fifo = tmp_path / "page.fifo"
    os.mkfifo(fifo)
    reader, received = _read_in_background(fifo)
    try:
        code, output = invoke(
            "rtb", "heldout", "report", str(folder), "--key", str(key), "--html", str(fifo),
            "--force",
        )  # fmt: skip
    finally:
        _let_go(reader, fifo)
    assert code == 0, output
    assert b"<" in received[0] and stat.S_ISFIFO(fifo.lstat().st_mode)


@pytest.mark.parametrize("force", [False, True])
def test_keygen_refuses_a_fifo_and_leaves_it_a_fifo(tmp_path: Path, force: bool) -> None:
    fifo = tmp_path / "signer"
    os.mkfifo(fifo)
    code, message = invoke("keygen", str(fifo), *["--force"] * force)
    assert code == 2 and "FIFO" in message, message
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and not (tmp_path / "signer.pub").exists()


@contextmanager
def _listening_socket(folder: Path, name: str) -> Iterator[Path]:
    """A UNIX socket file `folder/name` with a server bound to it for the block."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(name)  # relative (the test's cwd): socket paths are limited to ~100 bytes
        listener.listen(1)
        yield folder / name


@pytest.mark.parametrize("force", [False, True])
def test_export_to_a_socket_is_refused_naming_it_and_keeps_the_socket_unwritten(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, force: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    with _listening_socket(tmp_path, "rows.sock") as rows:
        before = sorted(tmp_path.iterdir())
        result = _trustbench(
            "export-ledger", str(run_dir), "--out", "rows.sock", *["--force"] * force, cwd=tmp_path
        )
        message = result.stderr.decode().strip()
        assert result.returncode == 2, message
        assert "rows.sock" in message and "socket" in message and "\n" not in message, message
        assert stat.S_ISSOCK(rows.lstat().st_mode) and sorted(tmp_path.iterdir()) == before


@pytest.mark.parametrize("force", [False, True])
def test_keygen_refuses_a_socket_and_leaves_it_a_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, force: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    with _listening_socket(tmp_path, "signer") as signer:
        code, message = invoke("keygen", "signer", *["--force"] * force)
        assert code == 2 and "socket" in message and "signer" in message, message
        assert stat.S_ISSOCK(signer.lstat().st_mode) and not (tmp_path / "signer.pub").exists()


def test_a_socket_output_is_refused_by_the_check_before_a_command_does_its_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check every writing command runs first: `trb profile --out SOCKET` ran the whole
    # reference before finding, at the end, that the socket could not be opened.
    monkeypatch.chdir(tmp_path)
    with _listening_socket(tmp_path, "out.sock") as out, pytest.raises(InputError, match="socket"):
        check_output_file(out, force=True)
