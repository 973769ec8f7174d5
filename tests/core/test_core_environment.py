from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from tests.support.child_env import child_env

from trustbench.core.spec._manifest import capture_environment, git_state

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        env=child_env(repo.parent),
    )


def test_git_state_records_commit_and_dirty_flag(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    _git(tmp_path, "add", "code.py")
    _git(tmp_path, "commit", "-qm", "c")
    clean = git_state(tmp_path)
    assert clean is not None and len(clean.commit) == 40 and clean.dirty is False
    (tmp_path / "code.py").write_text("x = 2\n")
    dirty = git_state(tmp_path)
    assert dirty is not None and dirty.commit == clean.commit and dirty.dirty is True


def test_git_state_outside_a_checkout_is_none_not_an_error(tmp_path: Path) -> None:
    assert git_state(tmp_path / "nowhere") is None


def test_environment_names_python_and_dependency_versions() -> None:
    env = capture_environment()
    assert env.python.count(".") == 2
    assert env.dependencies["aiohttp"] is not None and "rfc8785" in env.dependencies
