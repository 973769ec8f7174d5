"""Outputs never overwrite evidence: every writing command checks its path (issue 30, part 3)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from tests.rtb.test_review_track import POLICY, run_spec, spec_text
from tests.support.cli import invoke

EVIDENCE = ("ledger.sqlite", "ledger.head", "manifest.json")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_spec(tmp_path_factory.mktemp("outputs"), spec_text(POLICY))


@pytest.fixture
def run_dir(finished: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(finished, copy)
    return copy


def _snapshot(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run_dir.iterdir()) if p.is_file()}


@pytest.mark.parametrize("name", EVIDENCE)
@pytest.mark.parametrize("force", [False, True])
def test_export_ledger_never_writes_over_a_runs_evidence(
    run_dir: Path, name: str, force: bool
) -> None:
    before = _snapshot(run_dir)
    code, message = invoke(
        "export-ledger", str(run_dir), "--out", str(run_dir / name), *(["--force"] * force)
    )
    assert code == 2 and "evidence" in message and name in message
    assert _snapshot(run_dir) == before


def test_a_symlink_or_dotdot_path_to_the_ledger_is_refused_too(
    run_dir: Path, tmp_path: Path
) -> None:
    link = tmp_path / "innocent.jsonl"
    link.symlink_to(run_dir / "ledger.sqlite")
    before = _snapshot(run_dir)
    for out in (link, run_dir / "sub" / ".." / "ledger.sqlite"):
        code, message = invoke("export-ledger", str(run_dir), "--out", str(out), "--force")
        assert code == 2 and "evidence" in message
    assert _snapshot(run_dir) == before


def test_a_hard_link_to_the_ledger_keeps_the_ledger_when_replaced_with_force(
    run_dir: Path, tmp_path: Path
) -> None:
    link = tmp_path / "rows.jsonl"
    os.link(run_dir / "ledger.sqlite", link)
    before = _snapshot(run_dir)
    code, output = invoke("export-ledger", str(run_dir), "--out", str(link), "--force")
    assert code == 0, output
    assert _snapshot(run_dir) == before
    assert link.read_text().startswith('{"table": "experiments"')


@pytest.mark.parametrize("force", [False, True])
def test_report_outputs_of_a_run_are_never_replaced_even_with_force(
    run_dir: Path, force: bool
) -> None:
    (run_dir / "record.json").write_text("{}")
    code, message = invoke(
        "export-ledger", str(run_dir), "--out", str(run_dir / "record.json"), *["--force"] * force
    )
    assert code == 2 and "evidence" in message and "record.json" in message, message
    assert (run_dir / "record.json").read_text() == "{}"


def test_an_existing_file_is_replaced_only_with_force(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    out.write_text("keep me")
    code, message = invoke("export-ledger", str(run_dir), "--out", str(out))
    assert code == 2 and "existing file" in message and out.read_text() == "keep me"
    code, _ = invoke("export-ledger", str(run_dir), "--out", str(out), "--force")
    assert code == 0 and out.read_text() != "keep me"


@pytest.mark.parametrize(
    "command",
    [
        ("export-ledger", "RUN", "--out", ""),
        ("freeze", "SPEC", "--out", ""),
        ("export-inspect", "RUN", "--out", ""),
        ("rtb", "export", "--out", ""),
        ("keygen", ""),
    ],
)
def test_an_empty_output_path_is_refused_not_taken_as_the_working_folder(
    run_dir: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    args = [str(run_dir) if a == "RUN" else str(tmp_path / "x.toml") if a == "SPEC" else a
            for a in command]  # fmt: skip
    code, message = invoke(*args)
    assert code == 2 and "is empty" in message, message


def test_folder_outputs_refuse_a_run_folder(run_dir: Path) -> None:
    before = _snapshot(run_dir)
    for command in (
        ("export-inspect", str(run_dir), "--out", str(run_dir)),
        ("rtb", "export", "--out", str(run_dir)),
    ):
        code, message = invoke(*command)
        assert code == 2 and "names a run folder" in message, (command, message)
    assert _snapshot(run_dir) == before
