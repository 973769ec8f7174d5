"""The interop package stays optional: core never imports it, the CLI loads without Inspect."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.child_env import child_env
from tests.support.cli import invoke
from tests.support.import_graph import import_graph


def test_core_and_the_suites_import_nothing_from_interop() -> None:
    graph = import_graph(lazy_too=True)
    leaks = {
        (module, target)
        for module, targets in graph.items()
        if module.startswith(("trustbench.core", "trustbench.rtb", "trustbench.trb"))
        for target in targets
        if target.startswith("trustbench.interop")
    }
    assert leaks == set()


def test_importing_the_cli_does_not_import_inspect(tmp_path: Path) -> None:
    probe = "import sys, trustbench.cli; print('inspect_ai' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=child_env(tmp_path)
    )
    assert result.stdout.strip() == "False", result.stderr


def test_without_inspect_the_commands_say_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "inspect_ai" else real(name)
    )
    code, message = invoke("export-inspect", str(tmp_path), "--out", str(tmp_path / "logs"))
    assert code == 2 and "pip install -e '.[inspect]'" in message


def test_every_public_name_of_interop_resolves_without_running_inspect() -> None:
    import trustbench.interop as interop

    assert [name for name in interop.__all__ if getattr(interop, name, None) is None] == []
