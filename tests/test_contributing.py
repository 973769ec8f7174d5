"""CONTRIBUTING's three extension examples are code that works, not prose that drifts.

Each of the guide's tasks (a review metric, an enforcement boundary, a TRB measure) shows a
module `my_package/<name>.py` and a test for it. This copies both out of CONTRIBUTING.md into a
fresh folder, type-checks the modules with the project's checker settings and runs the guide's
tests against the trustbench under test, in a child process, as a contributor would.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.child_env import TESTED_SOURCE_ROOT, child_env

CONTRIBUTING = Path(__file__).resolve().parents[1] / "CONTRIBUTING.md"
EXAMPLES = {
    "metrics": "## Add a review metric",
    "boundaries": "## Add an enforcement boundary",
    "measures": "## Add a TRB measure",
}
"""Module name in the guide's `my_package` -> the heading of the section that shows it."""


def _example(name: str) -> tuple[str, str]:
    """The guide's module and test for one task, as the two Python blocks after its marker."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    section = text.split(EXAMPLES[name], 1)[1].split("\n## ", 1)[0]
    after = section.split(f"`my_package/{name}.py`:", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", after, flags=re.DOTALL)
    assert len(blocks) >= 2, f"CONTRIBUTING.md {EXAMPLES[name]!r}: a module and a test block"
    return blocks[0], blocks[1]


@pytest.fixture(scope="module")
def contributor_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding `my_package/` and the guide's tests, written from CONTRIBUTING.md."""
    root = tmp_path_factory.mktemp("contributor")
    package = root / "my_package"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in EXAMPLES:
        module, test = _example(name)
        (package / f"{name}.py").write_text(module)
        (root / f"test_guide_{name}.py").write_text(test)
    return root


def test_the_guide_s_extension_modules_type_check(contributor_folder: Path) -> None:
    checker = Path(sys.executable).parent / "basedpyright"
    assert checker.is_file(), "the dev extra's basedpyright is needed to check the guide's code"
    config = {
        "pythonVersion": "3.11",
        "typeCheckingMode": "standard",  # the project's setting (pyproject.toml)
        "include": ["my_package"],
        "extraPaths": [str(TESTED_SOURCE_ROOT)],
    }
    (contributor_folder / "pyrightconfig.json").write_text(json.dumps(config))
    env = child_env(contributor_folder)
    checked = subprocess.run(
        [str(checker), "--pythonpath", sys.executable, "--outputjson"],
        cwd=contributor_folder, capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    summary = json.loads(checked.stdout)["summary"]
    assert summary["filesAnalyzed"] == len(EXAMPLES) + 1, summary  # the modules and __init__
    assert (checked.returncode, summary["errorCount"]) == (0, 0), checked.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_guide_s_example_test_passes(contributor_folder: Path, name: str) -> None:
    env = child_env(contributor_folder, pythonpath=[contributor_folder])
    ran = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "--rootdir", str(contributor_folder),
            "--basetemp", str(contributor_folder / f"t-{name}"),
            str(contributor_folder / f"test_guide_{name}.py"),
        ],
        cwd=contributor_folder, capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    assert ran.returncode == 0 and " passed" in ran.stdout, ran.stdout[-3000:] + ran.stderr[-2000:]
