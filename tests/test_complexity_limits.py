"""The complexity limits bind every function in src/: the linter's thresholds, no exemptions."""

from __future__ import annotations

import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
COMPLEXITY_RULES = {"C901", "PLR0912", "PLR0915"}


def _lint() -> dict:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]


def test_the_linter_selects_the_complexity_rules_with_stated_thresholds() -> None:
    lint = _lint()
    selected = set(lint["select"]) | ({"C901"} if "C90" in lint["select"] else set())
    assert selected >= COMPLEXITY_RULES
    assert lint["mccabe"]["max-complexity"] <= 12
    assert lint["pylint"]["max-branches"] <= 12
    assert lint["pylint"]["max-statements"] <= 50


def test_no_source_file_is_exempt_from_the_complexity_rules() -> None:
    exempt = {
        path: sorted(COMPLEXITY_RULES & set(rules))
        for path, rules in _lint().get("per-file-ignores", {}).items()
        if path.startswith("src/") and COMPLEXITY_RULES & set(rules)
    }
    assert exempt == {}
