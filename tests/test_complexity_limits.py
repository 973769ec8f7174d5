"""The complexity limits bind every function in src/: the linter's thresholds, no way around them.

The configuration check alone would pass a function silenced in place (`# noqa: C901`) or a rule
dropped through another setting, so the linter is also run on src/ in isolation (no project
configuration, `noqa` comments ignored) with the thresholds the project states.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from tests.support.child_env import child_env

ROOT = Path(__file__).resolve().parents[1]
COMPLEXITY_RULES = {"C901", "PLR0912", "PLR0915"}


def _lint() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"][
        "lint"
    ]


def test_the_linter_selects_the_complexity_rules_with_stated_thresholds() -> None:
    lint = _lint()
    selected = set(lint["select"]) | ({"C901"} if "C90" in lint["select"] else set())
    assert selected >= COMPLEXITY_RULES
    assert not COMPLEXITY_RULES & set(lint.get("ignore", []) + lint.get("extend-ignore", []))
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


def test_every_function_in_src_is_within_the_limits_with_noqa_and_configuration_ignored(
    tmp_path: Path,
) -> None:
    lint = _lint()
    completed = subprocess.run(
        [
            sys.executable, "-m", "ruff", "check", "--isolated", "--ignore-noqa", "--no-cache",
            "--select", ",".join(sorted(COMPLEXITY_RULES)),
            "--config", f"lint.mccabe.max-complexity = {lint['mccabe']['max-complexity']}",
            "--config", f"lint.pylint.max-branches = {lint['pylint']['max-branches']}",
            "--config", f"lint.pylint.max-statements = {lint['pylint']['max-statements']}",
            "--output-format", "concise", str(ROOT / "src"),
        ],
        capture_output=True, text=True, check=False, env=child_env(tmp_path),
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
