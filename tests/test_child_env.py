"""The suite passes whatever the user's shell exports (issue 56): children get an allow-list."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.child_env import SUITE_SETTINGS, TESTED_SOURCE_ROOT, child_env, user_settings

PLANTED = {
    "TRUSTBENCH_CACHE": "/nonexistent/planted-cache",
    "TRUSTBENCH_HELDOUT_KEY": "planted-key",
    "http_proxy": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "no_proxy": "planted.invalid",
    "REQUESTS_CA_BUNDLE": "/nonexistent/planted.pem",
    "SSL_CERT_FILE": "/nonexistent/planted.pem",
    "OPENAI_API_KEY": "sk-planted",
}
"""What a user's shell may export that must not reach a process a test starts."""


def _child_environ(env: dict[str, str]) -> dict[str, str]:
    probe = "import json, os; print(json.dumps(dict(os.environ)))"
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    )
    return json.loads(completed.stdout)


def test_a_child_never_sees_a_planted_trustbench_setting_proxy_or_ca_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in PLANTED.items():
        monkeypatch.setenv(name, value)
    seen = _child_environ(child_env(tmp_path))
    assert not set(PLANTED) & set(seen), sorted(set(PLANTED) & set(seen))
    assert not [value for value in seen.values() if "planted" in value or ":9" in value]


def test_a_child_gets_its_home_and_temp_folder_inside_the_tests_own_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", "/nonexistent")
    monkeypatch.setenv("TMPDIR", "/nonexistent")
    seen = _child_environ(child_env(tmp_path))
    assert Path(seen["HOME"]).is_dir() and Path(seen["HOME"]).is_relative_to(tmp_path)
    assert Path(seen["TMPDIR"]).is_dir() and Path(seen["TMPDIR"]).is_relative_to(tmp_path)


def test_a_child_imports_the_trustbench_under_test_ahead_of_the_callers_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shadow = tmp_path / "shadow" / "trustbench"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('the shadow copy was imported')\n")
    monkeypatch.setenv("PYTHONPATH", str(shadow.parent))
    env = child_env(tmp_path, pythonpath=[tmp_path / "named"], extra={"EXTRA": "kept"})
    probe = "import trustbench; print(trustbench.__file__)"
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env
    )
    assert Path(completed.stdout.strip()).resolve().is_relative_to(TESTED_SOURCE_ROOT)
    entries = env["PYTHONPATH"].split(os.pathsep)
    assert entries.index(str(tmp_path / "named")) < entries.index(str(shadow.parent))
    assert env["EXTRA"] == "kept"


def test_the_test_process_itself_holds_none_of_the_users_settings(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # The root conftest drops them for the session: in-process CLI tests read only what a
    # test sets (this fails on the old conftest when the shell exports TRUSTBENCH_CACHE).
    session = tmp_path_factory.getbasetemp()
    assert user_settings(os.environ) == ["TRUSTBENCH_CACHE"]
    assert Path(os.environ["TRUSTBENCH_CACHE"]).is_relative_to(session)
    assert Path(os.environ["HOME"]).is_relative_to(session)


def test_the_suites_own_settings_are_kept_for_the_test_process_but_never_given_to_a_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in SUITE_SETTINGS:
        monkeypatch.setenv(name, str(tmp_path))
    assert not SUITE_SETTINGS & set(user_settings(os.environ))
    assert not SUITE_SETTINGS & set(child_env(tmp_path))


def test_a_child_caches_its_bytecode_where_the_test_process_does_never_beside_the_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = tmp_path / "pycache"
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(prefix))
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    module = tmp_path / "imported" / "cached_here.py"
    module.parent.mkdir()
    module.write_text("VALUE = 1\n")
    subprocess.run(
        [sys.executable, "-c", "import cached_here"],
        check=True,
        env=child_env(tmp_path, pythonpath=[module.parent]),
    )
    assert not (module.parent / "__pycache__").exists()
    assert list(prefix.rglob("cached_here.*.pyc"))
