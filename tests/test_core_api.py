"""Suites, interop and their tests use only `trustbench.core`'s public API, never its `_modules`.

Core's public surface is what `trustbench.core` and its public modules (no leading underscore in
the dotted path: `core.report`, `core.stats`, `core.figures`, `core.gates`) export. Everything
else in core may change without notice, so a suite that reaches into it would break on a
refactor of core. Only core itself and core's own unit tests (`tests/core/`) may import
core's private modules. Imports inside functions and under `if TYPE_CHECKING:` count too.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.import_graph import PACKAGE_ROOT

TESTS_ROOT = Path(__file__).resolve().parent
CORE = "trustbench.core"


def _is_private(dotted: str) -> bool:
    """True for a module path or name inside core that is not part of its public API."""
    if dotted != CORE and not dotted.startswith(CORE + "."):
        return False
    return any(part.startswith("_") for part in dotted.split("."))


def _private_imports(path: Path) -> Iterator[str]:
    """`file:line: what` for each import of a private core module or name in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if _is_private(target):
                yield f"{path}:{node.lineno}: {target}"


def _checked_files() -> list[Path]:
    core_source = PACKAGE_ROOT / "core"
    core_tests = TESTS_ROOT / "core"
    source = [p for p in PACKAGE_ROOT.rglob("*.py") if not p.is_relative_to(core_source)]
    tests = [p for p in TESTS_ROOT.rglob("*.py") if not p.is_relative_to(core_tests)]
    return sorted(source + tests)


def test_the_rule_tells_public_from_private() -> None:
    assert _is_private("trustbench.core.ledger._store.Ledger")
    assert _is_private("trustbench.core.report._record.iter_trial_rows")
    assert _is_private("trustbench.core._report_run")
    assert not _is_private("trustbench.core.Ledger")
    assert not _is_private("trustbench.core.report.iter_trial_rows")
    assert not _is_private("trustbench.rtb.review._grading")


def test_the_checker_finds_a_private_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from trustbench.core import Manifest\n"
        "def f():\n"
        "    from trustbench.core.ledger._store import Ledger\n"
        "import trustbench.core.report._verdict\n",
        encoding="utf-8",
    )
    found = list(_private_imports(sample))
    assert {line.split(": ", 1)[1] for line in found} == {
        "trustbench.core.ledger._store.Ledger",
        "trustbench.core.report._verdict",
    }


def test_suites_interop_and_their_tests_import_only_cores_public_api() -> None:
    files = _checked_files()
    assert any(p.is_relative_to(PACKAGE_ROOT / "interop") for p in files)
    found = [hit for path in files for hit in _private_imports(path)]
    assert found == [], "private core imports (use trustbench.core's public API):\n" + "\n".join(
        found
    )


@pytest.mark.parametrize(
    "module",
    [
        "trustbench.core",
        "trustbench.core.report",
        "trustbench.core.stats",
        "trustbench.core.figures",
        "trustbench.core.gates",
    ],
)
def test_every_name_of_cores_public_modules_resolves(module: str) -> None:
    imported = importlib.import_module(module)
    missing = [name for name in imported.__all__ if not hasattr(imported, name)]
    assert missing == []
