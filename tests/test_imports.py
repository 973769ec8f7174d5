"""Every public package imports on its own, in any order (no circular-import traps)."""

import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.child_env import child_env

PACKAGES = [
    "trustbench.providers",
    "trustbench.core",
    "trustbench.rtb",
    "trustbench.trb",
    "trustbench.cli",
]


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_first_in_a_fresh_interpreter(package: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", f"import {package}"],
        capture_output=True, text=True, check=False, env=child_env(tmp_path),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
