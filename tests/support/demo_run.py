"""`trustbench demo`, run once per test session, for every test that checks one of its runs.

The demo freezes, runs and reports the built-in reviewer, control-path and workflow demos
exactly as `run_review_demo`, `run_control_demo` and `run_workflow_demo` do alone (same spec,
same seeds, into `<out>/rtb-review`, `rtb-control`, `rtb-workflow`). Each of those runs is
minutes on a loaded 2-core machine, so the tests of a track's demo read the demo's own run of it
instead of running it a second time: the session pays for each run once.

Registered in `tests/conftest.py`, the one place a session fixture is defined once for every
module (a fixture imported into two modules is two fixtures and would run twice).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trustbench.cli import app
from trustbench.core import ReportResult
from trustbench.demo import DEFAULT_OUT

DEMO_TIMEOUT_S = 1500
"""Time limit of a test that uses `demo_run`: whichever runs first pays for the whole demo
(11 min measured at load 15 on 2 cores, the v0.3 control and workflow steps most of it)."""

_TRACK_RUNS = {
    "rtb-review": ("trustbench.rtb.review._quick", "run_review_demo"),
    "rtb-control": ("trustbench.rtb.control.track", "run_control_demo"),
    "rtb-workflow": ("trustbench.rtb.workflow.track", "run_workflow_demo"),
}
"""Demo folder -> (module, function) the demo step calls, at call time, to run that track."""


@dataclass(frozen=True)
class DemoRun:
    """What one `trustbench demo` (no options, default folder) did."""

    exit_code: int
    """The command's exit code."""
    output: str
    """Everything the command printed."""
    out: Path
    """The folder it wrote into (`./trustbench-demo/` of the folder it ran in)."""
    cwd: Path
    """The folder it ran in."""
    results: dict[str, ReportResult]
    """What each RTB track step's run returned, by its folder under `out` (`rtb-review`...)."""

    def track(self, folder: str) -> ReportResult:
        """The result of the track run in `out/folder`; a demo that stopped before it fails the
        test with the demo's output."""
        assert folder in self.results, (
            f"trustbench demo exited {self.exit_code} before {folder}:\n{self.output[-3000:]}"
        )
        return self.results[folder]


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """`trustbench demo` in an empty folder, each track step's `ReportResult` kept on the way.

    The track functions are wrapped, not replaced: each still runs in full into the demo's own
    folder with the demo's progress reporter, and its result is only recorded.
    """
    import importlib

    cwd = tmp_path_factory.mktemp("demo-session")
    results: dict[str, ReportResult] = {}
    with pytest.MonkeyPatch.context() as patch:
        for folder, (module_name, function_name) in _TRACK_RUNS.items():
            module = importlib.import_module(module_name)
            patch.setattr(module, function_name, _recording(getattr(module, function_name),
                                                            folder, results))  # fmt: skip
        patch.chdir(cwd)
        result = CliRunner().invoke(app, ["demo"])
    return DemoRun(result.exit_code, result.output, cwd / DEFAULT_OUT, cwd, results)


def _recording(
    run: Callable[..., ReportResult], folder: str, results: dict[str, ReportResult]
) -> Callable[..., ReportResult]:
    """`run`, keeping what it returns under `folder`."""

    def recorded(out_dir: Path | str, progress: Any = None) -> ReportResult:
        result = run(out_dir, progress)
        results[folder] = result
        return result

    return recorded
