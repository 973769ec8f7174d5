"""One sandbox for every candidate's code: attackers written apart from it find nothing.

The candidates here (`fs_walker.py`, `shm_pair.py`) were written as a cheat would write them,
from the public contract only; each test copies them into a folder of its own, so nothing of the
suite lies beside them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.child_env import child_env

from trustbench.rtb.heldout._crypto import new_key_pair
from trustbench.rtb.heldout._seal import seal_corpus
from trustbench.sandbox import platform_problem

HERE = Path(__file__).parent
FIXTURE = HERE.parent / "rtb" / "fixtures" / "rtb_v0_2_user"
SPEC = """
suite = "rtb"
track = "review"
trials_per_case = 1
concurrency = 2
timeout_s = 20.0
{isolation}

[corpus]
path = "set"

[[candidates]]
name = "walker"
kind = "inprocess"
entry = "fs_walker:reviewer"

[analysis]
unit = "case"
"""

needs_the_sandbox = pytest.mark.skipif(
    platform_problem() is not None, reason=f"no sandbox here: {platform_problem()}"
)


def _candidate_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "cand"
    folder.mkdir()
    shutil.copy(HERE / "fs_walker.py", folder / "fs_walker.py")
    return folder


def _cli(tmp_path: Path, *args: str, key: Path | None = None) -> subprocess.CompletedProcess[str]:
    extra = {"TRUSTBENCH_HELDOUT_KEY": str(key)} if key else {}
    env = child_env(tmp_path, pythonpath=[tmp_path / "cand"], extra=extra)
    return subprocess.run(
        [sys.executable, "-m", "trustbench", *args],
        cwd=tmp_path, capture_output=True, text=True, check=False, env=env, timeout=120,
    )  # fmt: skip


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _sealed_run(tmp_path: Path, *, isolation: str, key_in_env: bool) -> dict:
    """Seal the fixture (the owner's key on this machine), freeze, run and report the walker."""
    private, public = new_key_pair()
    key = tmp_path / "owner" / "owner.key"
    key.parent.mkdir()
    key.write_text(private + "\n", encoding="utf-8")
    seal_corpus(FIXTURE, public, tmp_path / "set", budget=5, set_id="hs-walk", at="2026-12-01")
    _candidate_folder(tmp_path)
    (tmp_path / "spec.toml").write_text(SPEC.format(isolation=isolation), encoding="utf-8")
    env_key = key if key_in_env else None
    _ok(_cli(tmp_path, "freeze", "spec.toml", "--out", "run", key=env_key))
    _ok(_cli(tmp_path, "run", "run", "--quiet", key=env_key))
    report = _cli(tmp_path, "report", "run", "--heldout-key", str(key), "--json")
    assert report.returncode in (0, 1), report.stdout + report.stderr
    return json.loads(report.stdout)


def _correct(tmp_path: Path) -> float:
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    return {f["name"]: f["estimate"] for f in record["figures"]["walker"]}["correct_decision_rate"]


@needs_the_sandbox
def test_a_filesystem_walking_reviewer_finds_no_key_and_scores_at_chance(tmp_path: Path) -> None:
    # The owner's key lies on this machine, its path even in the run's environment.
    summary = _sealed_run(tmp_path, isolation="", key_in_env=True)
    assert _correct(tmp_path) < 1.0  # held: the one answer it gives without the key
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    mode = record["candidate_isolation"]["walker"]
    assert mode.startswith("landlock ABI") and "ipc/net namespaces" in mode
    assert "could read" not in mode
    assert summary["held_out_set"]["answer_key_available_to_candidate"] is False


def test_the_same_reviewer_unconfined_steals_the_key_and_the_report_says_so(
    tmp_path: Path,
) -> None:
    # The attack is real: with `isolation = "none"` it decrypts the set and scores 5/5.
    summary = _sealed_run(tmp_path, isolation='isolation = "none"', key_in_env=True)
    assert _correct(tmp_path) == 1.0
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    assert record["candidate_isolation"]["walker"].startswith("none")
    assert summary["held_out_set"]["answer_key_available_to_candidate"] is True
    headline = summary["verdicts"]["walker"]["headline"]
    assert 'isolation = "none" for walker' in headline
    assert "ran under: none" in (tmp_path / "run" / "report.html").read_text()
