"""Evaluability first (issue 15): a reviewer that never answered is "not evaluable", not safe."""

from __future__ import annotations

import html
import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from tests.rtb.test_review_track import POLICY, inprocess, small_corpus, spec_text
from tests.support.cli import invoke
from typer.testing import CliRunner

from trustbench.cli import app
from trustbench.core import report_run
from trustbench.errors import CheckFailed

FA_GATE = (
    '[[gates]]\nname = "fa"\nmetric = "false_approval_rate"\ncomparison = "<="\n'
    'threshold = 0.6\nbound = "upper"\ninterval_method = "clopper_pearson"\nconfidence = 0.95\n'
)
NO_RETRY = "[retry]\ntransport_max_retries = 0\n"


def closed_port() -> int:
    """A 127.0.0.1 port with nothing listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unreachable(name: str = "unreachable") -> str:
    """An `openai_chat` candidate pointed at a closed local port."""
    return (
        f'[[candidates]]\nname = "{name}"\nkind = "openai_chat"\nmodel = "m"\n'
        f'base_url = "http://127.0.0.1:{closed_port()}/v1"\n'
    )


@pytest.fixture(scope="module")
def unreachable_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    """Reference policy next to an unreachable candidate, frozen and run through the CLI."""
    tmp_path = tmp_path_factory.mktemp("unreachable")
    small_corpus(tmp_path / "corpus")
    spec = tmp_path / "spec.toml"
    spec.write_text(
        spec_text(
            POLICY + unreachable(),
            chains='{ name = "policy+unreachable", members = ["reference-policy", "unreachable"] }',
            gates=FA_GATE,
            extra=NO_RETRY,
        )
    )
    run_dir = tmp_path / "run"
    code, output = invoke("freeze", str(spec), "--out", str(run_dir))
    assert code == 0, output
    # Past preflight (which would stop the unreachable candidate before any trial, exit 2):
    # this module checks how a candidate that failed every trial is reported.
    code, output = invoke("run", str(run_dir), "--quiet", "--no-preflight")
    return run_dir, code, output


def test_run_exits_3_naming_a_candidate_that_failed_every_trial(
    unreachable_run: tuple[Path, int, str],
) -> None:
    _, code, output = unreachable_run
    assert code == 3
    assert "'unreachable' failed every trial (connection_error)" in output


def test_unreachable_candidate_is_not_evaluable_and_blocks_release(
    unreachable_run: tuple[Path, int, str],
) -> None:
    run_dir, _, _ = unreachable_run
    code, output = invoke("report", str(run_dir))
    record: dict[str, Any] = json.loads((run_dir / "record.json").read_text())
    subjects = record["evaluability"]["subjects"]
    assert subjects["unreachable"]["evaluable"] is False
    assert subjects["unreachable"]["transport_failed"] == subjects["unreachable"]["attempted"] > 0
    assert subjects["reference-policy"]["evaluable"] is True
    # A chain whose second member never answered was never reviewed as declared.
    chain = subjects["policy+unreachable"]
    assert (chain["valid"], chain["transport_failed"], chain["evaluable"]) == (0, 12, False)
    gates = {g["spec"]["name"]: g for g in record["gates"]["results"]}
    # Its 0/4 false approvals (upper bound 0.527 <= 0.6, a pass before issue 15) come from
    # never answering: the gate must not read as passed.
    assert gates["fa (unreachable)"]["status"] == "not_evaluable"
    assert gates["evaluability (unreachable)"]["status"] == "failed"
    assert gates["fa (reference-policy)"]["status"] == "passed"
    assert record["gates"]["blocking"] is True
    assert code == 1, output


def test_valid_response_rate_is_the_first_figure_of_every_subject(
    unreachable_run: tuple[Path, int, str],
) -> None:
    run_dir, _, _ = unreachable_run
    report_run(run_dir)
    record = json.loads((run_dir / "record.json").read_text())
    firsts = {subject: figs[0] for subject, figs in record["figures"].items()}
    assert {s: f["name"] for s, f in firsts.items()} == {
        "reference-policy": "valid_response_rate",
        "unreachable": "valid_response_rate",
        "policy+unreachable": "valid_response_rate",
    }
    assert firsts["unreachable"]["numerator"] == 0
    assert firsts["reference-policy"]["estimate"] == 1.0


def test_transport_error_classes_reach_the_record_and_the_page(
    unreachable_run: tuple[Path, int, str],
) -> None:
    run_dir, _, _ = unreachable_run
    report_run(run_dir)
    record = json.loads((run_dir / "record.json").read_text())
    classes = record["review"]["configurations"]["unreachable"]["error_classes"]
    assert classes == {"connection_error": 12}
    page = (run_dir / "report.html").read_text()
    assert "connection_error 12" in page
    # The evaluability blocks come before any error-rate section (gates stay at the top).
    assert page.index("Evaluability: valid responses") < page.index(
        "false_approval_rate by configuration"
    )


def test_a_failing_sentinel_is_shown_but_does_not_block_release(tmp_path: Path) -> None:
    small_corpus(tmp_path / "corpus")
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(POLICY + inprocess("empty", "empty")))
    run_dir = tmp_path / "run"
    assert invoke("freeze", str(spec), "--out", str(run_dir))[0] == 0
    assert invoke("run", str(run_dir), "--quiet")[0] == 0
    result = report_run(run_dir)
    record = json.loads(result.record_path.read_text())
    empty = record["evaluability"]["subjects"]["empty"]
    assert empty["instrument"] is True and empty["evaluable"] is False
    assert not result.blocked


def _figure_cells(page: str) -> dict[str, list[str]]:
    """Every figure row of the page: name -> the estimate cells shown for it."""
    cells: dict[str, list[str]] = {}
    for name, estimate in re.findall(
        r'<td class="name">([^<]*)</td>\s*<td class="estimate[^"]*">([^<]*)</td>', page
    ):
        cells.setdefault(html.unescape(name), []).append(estimate)
    return cells


def test_an_unreachable_candidate_shows_no_estimate_anywhere_but_its_valid_rate(
    unreachable_run: tuple[Path, int, str],
) -> None:
    # Never answering gives 0 of 4 false approvals, the best a table can show: withheld.
    run_dir, _, _ = unreachable_run
    report_run(run_dir)
    record = json.loads((run_dir / "record.json").read_text())
    for subject in ("unreachable", "policy+unreachable"):
        valid, *rest = record["figures"][subject]
        assert (valid["name"], valid["estimate"]) == ("valid_response_rate", 0.0)
        # Only the reply counts stay: they are what makes it not evaluable.
        shown = {f["name"]: f["estimate"] for f in rest if f["status"] == "measured"}
        replies = {"missing_rate", "invalid_rate"}  # per case, and their per-trial figures
        assert shown.keys() <= replies | {name + "_per_trial" for name in replies}
        assert shown["missing_rate"] > 0  # replies never came
        withheld = [f for f in rest if f["name"] not in shown]
        assert {f["status"] for f in withheld} <= {"not_evaluable", "not_applicable"}
        assert all(f["estimate"] is None and f["intervals"] == [] for f in withheld)
        assert any(f["status"] == "not_evaluable" for f in withheld)
    reference = {f["name"]: f for f in record["figures"]["reference-policy"]}
    assert reference["false_approval_rate"]["status"] == "measured"
    review = record["review"]
    for by in ("group", "variant"):
        for figures in review["breakdowns"]["unreachable"][by].values():
            assert all(f["estimate"] is None for f in figures)
    chain = review["chains"]["policy+unreachable"]
    assert chain["not_evaluable"] == "no valid response in 12 attempted trial(s)"
    compared = [p for p in review["paired"] if "unreachable" in (p["first"], p["second"])]
    assert compared and all("unreachable" in p["not_evaluable"] for p in compared)
    page = (run_dir / "report.html").read_text()
    shown = _figure_cells(page)
    for name, estimates in shown.items():
        if "unreachable" in name and not name.startswith(("valid_response_rate", "missing_rate")):
            assert set(estimates) <= {"not evaluable", "n/a"}, (name, estimates)
    assert shown["false_approval_rate"].count("not evaluable") == 2  # per-configuration tables
    assert "0.00%" in shown["reference-policy"]  # the forest row of an evaluable reviewer


def test_the_json_summary_gives_no_figure_estimate_for_a_not_evaluable_gate(
    unreachable_run: tuple[Path, int, str],
) -> None:
    run_dir, _, _ = unreachable_run
    result = CliRunner().invoke(app, ["report", str(run_dir), "--json"])
    assert isinstance(result.exception, CheckFailed) and result.exception.exit_code == 1
    summary = json.loads(result.stdout)
    gates = {g["gate"]: g for g in summary["gates"]}
    assert gates["fa (unreachable)"]["figure_estimate"] is None
    assert gates["fa (reference-policy)"]["figure_estimate"] == 0.0
    assert gates["evaluability (unreachable)"]["subject"] == "unreachable"
