"""The built-in reviewer demo: sentinel signatures, named gate failures, a self-contained page."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import invoke

from trustbench.core._report_run import ReportResult
from trustbench.rtb.review.track import run_review_demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[ReportResult, dict[str, Any]]:
    """The packaged demo, run once for the module (60 cases x 7 reviewers x K=2)."""
    result = run_review_demo(tmp_path_factory.mktemp("demo") / "run")
    return result, json.loads(result.record_path.read_text())


def _figure(record: dict[str, Any], subject: str, name: str) -> dict[str, Any]:
    return next(f for f in record["figures"][subject] if f["name"] == name)


def test_always_permit_reviewer_exposes_every_false_approval_and_unsupported_permit(
    demo: tuple[ReportResult, dict[str, Any]],
) -> None:
    _, record = demo
    for name in ("false_approval_rate", "unsupported_permit_rate"):
        figure = _figure(record, "always-permit", name)
        assert (figure["numerator"], figure["denominator"]) == (20, 20)


def test_always_deny_reviewer_fails_permitted_task_utility(
    demo: tuple[ReportResult, dict[str, Any]],
) -> None:
    _, record = demo
    figure = _figure(record, "always-deny", "utility_loss_rate")
    assert (figure["numerator"], figure["denominator"]) == (20, 20)


def test_empty_stays_missing_malformed_stays_invalid_and_forged_refs_are_never_supported(
    demo: tuple[ReportResult, dict[str, Any]],
) -> None:
    _, record = demo
    assert _figure(record, "empty", "missing_rate")["estimate"] == 1.0
    assert _figure(record, "malformed", "invalid_rate")["estimate"] == 1.0
    assert _figure(record, "forged-refs", "supported_finding_rate")["numerator"] == 0
    for sentinel in ("empty", "malformed", "forged-refs"):
        assert _figure(record, sentinel, "false_approval_rate")["numerator"] == 0


def test_demo_report_names_each_configuration_that_fails_a_gate_without_raising(
    demo: tuple[ReportResult, dict[str, Any]],
) -> None:
    result, _ = demo
    assert result.blocked
    failed = {g.spec.name for g in result.gates if g.status == "failed"}
    assert "false-approvals (always-permit)" in failed
    assert "utility (always-deny)" in failed
    assert "supported-findings (forged-refs)" in failed
    passed = {g.spec.name for g in result.gates if g.status == "passed"}
    assert {f"{gate} (reference-policy)" for gate in ("false-approvals", "utility")} <= passed
    code, output = invoke("report", str(result.record_path.parent))
    assert code == 1 and "false-approvals (always-permit)" in output


class _Page(HTMLParser):
    """Collects tags and every attribute that could load something from elsewhere."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "action") and value and not value.startswith("#"):
                self.external.append(f"{tag} {name}={value}")
        if tag in ("script", "link", "iframe", "img", "object", "embed"):
            self.external.append(tag)


def test_demo_page_parses_and_references_nothing_outside_itself(
    demo: tuple[ReportResult, dict[str, Any]],
) -> None:
    result, _ = demo
    text = result.html_path.read_text()
    page = _Page()
    page.feed(text)
    page.close()
    assert page.external == []
    assert page.tags.count("svg") >= 3 + 9, "three forest plots and a heatmap per configuration"
    for phrase in ("always-permit", "not ground truth", "Paired tests", "Chain conditionals"):
        assert phrase in text


@pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="chromium is not installed here; the page is still checked by the HTML parser",
)
def test_demo_page_renders_in_headless_chromium(
    demo: tuple[ReportResult, dict[str, Any]], tmp_path: Path
) -> None:
    result, _ = demo
    chromium = shutil.which("chromium")
    assert chromium is not None
    completed = subprocess.run(
        [
            chromium,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            result.html_path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    dom = completed.stdout
    assert "RTB reviewer track" in dom
    assert dom.count("<svg") >= 12
    assert "always-permit: upper bound" in dom
