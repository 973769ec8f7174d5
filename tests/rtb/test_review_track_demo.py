"""The built-in reviewer demo: sentinel signatures, named gate failures, a self-contained page."""

from __future__ import annotations

import asyncio
import json
import os
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from tests.support.browser import CHROMIUM, Browser, start_chromium
from tests.support.cli import invoke

from trustbench.core import ReportResult
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
        assert (figure["numerator"], figure["denominator"]) == (40, 40)  # 20 cases x K=2


def test_always_deny_reviewer_fails_permitted_task_utility(
    demo: tuple[ReportResult, dict[str, Any]],
) -> None:
    _, record = demo
    figure = _figure(record, "always-deny", "utility_loss_rate")
    assert (figure["numerator"], figure["denominator"]) == (40, 40)  # 20 cases x K=2


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
    # The sentinels are instruments built to fail: they fail as built, block nothing, and the
    # page says so; the candidates (the reference policy, the chain with it) pass.
    assert not result.blocked
    verdicts = {v.subject: v.status for v in result.verdicts}
    assert verdicts["always-permit"] == verdicts["always-deny"] == "as_expected"
    assert verdicts["reference-policy"] == "passed"
    failed = {g.spec.name for g in result.gates if g.status == "failed"}
    assert "false-approvals (always-permit)" in failed
    assert "utility (always-deny)" in failed
    assert "supported-findings (forged-refs)" in failed
    passed = {g.spec.name for g in result.gates if g.status == "passed"}
    assert {f"{gate} (reference-policy)" for gate in ("false-approvals", "utility")} <= passed
    code, output = invoke("report", str(result.record_path.parent))
    assert code == 0 and "false-approvals (always-permit)" in output


class _Page(HTMLParser):
    """Collects tags and every attribute that could load something from elsewhere."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.external: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "action") and value and not value.startswith("#"):
                self.external.append(f"{tag} {name}={value}")
        if tag in ("link", "iframe", "img", "object", "embed"):
            self.external.append(tag)
        if tag == "script":
            self.scripts += 1


def test_demo_page_parses_and_references_nothing_outside_itself(
    demo: tuple[ReportResult, dict[str, Any]],
) -> None:
    result, _ = demo
    text = result.html_path.read_text()
    page = _Page()
    page.feed(text)
    page.close()
    assert page.external == []
    assert page.scripts == 1, "one inline script (the drill-down filter), nothing loaded"
    assert page.tags.count("svg") >= 3 + 9, "three forest plots and a heatmap per configuration"
    for phrase in ("always-permit", "not ground truth", "Paired tests", "Chain conditionals"):
        assert phrase in text


FILTER_AND_COUNT = """(() => {
  const box = document.querySelector("input.filter");
  const rows = () => [...document.querySelectorAll("#" + box.dataset.table + " tbody tr")];
  const before = rows().filter(r => !r.hidden).length;
  box.value = "always-deny";
  box.dispatchEvent(new Event("input"));
  const shown = rows().filter(r => !r.hidden);
  return {before, after: shown.length,
          all_match: shown.every(r => r.cells[0].textContent === "always-deny")};
})()"""


@pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (CI: apt-get install -y chromium)"
)
def test_demo_page_reads_in_headless_chromium_short_with_verdicts_and_a_working_filter(
    demo: tuple[ReportResult, dict[str, Any]], tmp_path: Path
) -> None:
    """The page a new user opens: under 15,000 px, verdicts first, drill-down filter working.

    Set TRUSTBENCH_SCREENSHOTS=<folder> to keep the PNG (docs/screenshots/ comes from here).
    """
    result, record = demo
    shots = Path(os.environ.get("TRUSTBENCH_SCREENSHOTS") or tmp_path)
    chromium, ws_url = start_chromium(tmp_path / "profile")

    async def inspect() -> tuple[float, Any, Any]:
        async with aiohttp.ClientSession() as http:
            browser = await Browser.open(http, ws_url)
            await browser.send("Page.navigate", url=result.html_path.as_uri())
            await browser.html_after(None)
            height = await browser.page_height()
            await browser.screenshot(shots / "report-review.png", max_height=2400)
            ids = await browser.evaluate(
                "[...document.querySelectorAll('section[id]')].map(s => s.id)"
            )
            filtered = await browser.evaluate(FILTER_AND_COUNT)
            await browser.ws.close()
            return height, ids, filtered

    try:
        height, ids, filtered = asyncio.run(inspect())
    finally:
        chromium.terminate()
        chromium.wait(timeout=20)
    assert height < 15_000, f"report page is {height:.0f} px tall"
    assert ids[:3] == ["verdicts", "instruments", "gates"]
    # One row per case and reviewer configuration (the unchecked baseline has no reply).
    configurations = record["review"]["configurations"].values()
    reviewers = [c for c in configurations if c["kind"] != "unchecked"]
    assert filtered["before"] == 60 * len(reviewers)
    assert filtered["after"] == 60 and filtered["all_match"]
    assert (shots / "report-review.png").read_bytes().startswith(b"\x89PNG")
