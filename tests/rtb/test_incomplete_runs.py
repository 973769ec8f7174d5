"""Only complete runs release: a run with planned trials not run is "incomplete" everywhere."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests.rtb.test_review_track import POLICY, small_corpus, spec_text
from tests.support.cli import invoke

from trustbench.core import build_manifest, run_experiment, write_manifest
from trustbench.core.report import INCOMPLETE_EXIT

GATE = (
    '[[gates]]\nname = "fa"\nmetric = "false_approval_rate"\ncomparison = "<="\n'
    'threshold = 0.5\nbound = "estimate"\ncandidates = ["reference-policy"]\n'
)


@pytest.fixture(scope="module")
def partial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference policy (which passes its gate when complete), 3 of 12 trials run."""
    base = tmp_path_factory.mktemp("partial")
    small_corpus(base / "corpus")
    (base / "spec.toml").write_text(spec_text(POLICY, gates=GATE))
    write_manifest(build_manifest(base / "spec.toml"), base / "run")
    run_experiment(base / "run", limit=3)
    return base / "run"


@pytest.fixture
def run_dir(partial: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(partial, copy)
    return copy


def test_a_limited_run_is_incomplete_in_json_record_and_exit_code(run_dir: Path) -> None:
    code, output = invoke("report", str(run_dir), "--json")
    assert code == INCOMPLETE_EXIT == 4
    summary = json.loads(output[: output.rindex("}") + 1])
    assert summary["complete"] is False and summary["blocked"] is True
    assert summary["exit_code"] == INCOMPLETE_EXIT
    assert summary["verdicts"]["reference-policy"]["status"] == "incomplete"
    assert "3 of 12 planned trials ran" in summary["verdicts"]["reference-policy"]["headline"]
    assert all(gate["status"] != "passed" for gate in summary["gates"])
    record = json.loads((run_dir / "record.json").read_text())
    assert record["complete"] is False
    assert record["verdicts"]["reference-policy"]["status"] == "incomplete"
    assert all(gate["status"] != "passed" for gate in record["gates"]["results"])


def test_the_html_of_an_incomplete_run_says_so_above_the_gates(run_dir: Path) -> None:
    invoke("report", str(run_dir))
    page = (run_dir / "report.html").read_text()
    assert "Run incomplete: 3 of 12 planned trials ran" in page
    assert "exits 4" in page and "exits 0" not in page
    # In the verdict section at the top, not in a footnote.
    assert page.index("Verdict per candidate") < page.index("Run incomplete")
    assert page.index("Run incomplete") < page.index('id="instruments"')


def test_finishing_the_run_makes_it_complete_and_releasable(run_dir: Path) -> None:
    code, output = invoke("run", str(run_dir), "--quiet")
    assert code == 0, output
    code, output = invoke("report", str(run_dir), "--json")
    assert code == 0, output
    summary = json.loads(output[: output.rindex("}") + 1])
    assert summary["complete"] is True
    assert summary["verdicts"]["reference-policy"]["status"] == "passed"
