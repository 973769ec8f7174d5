"""The built-in reviewer demo: sentinel signatures, named gate failures, a self-contained page."""

from __future__ import annotations

import asyncio
import json
import os
import re
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from tests.support.browser import CHROMIUM, Browser, start_chromium
from tests.support.cli import invoke
from tests.support.demo_run import DemoRun

from trustbench.core import ReportResult
from trustbench.core.report import iter_trial_rows
from trustbench.demo import demo_corpus_root
from trustbench.rtb.corpus import load_corpus


@pytest.fixture(scope="module")
def demo(demo_run: DemoRun) -> tuple[ReportResult, dict[str, Any]]:
    """The packaged demo (every case of its corpus x 7 reviewers x K=2): `run_review_demo` as
    `trustbench demo` ran it (`tests/support/demo_run.py`), once for the session."""
    result = demo_run.track("rtb-review")
    return result, json.loads(result.record_path.read_text())


def _figure(record: dict[str, Any], subject: str, name: str) -> dict[str, Any]:
    return next(f for f in record["figures"][subject] if f["name"] == name)


@cache
def _cases_deciding(decision: str) -> int:
    """Cases of the demo spec's corpus whose reference decision is `decision` (read, not pinned)."""
    cases = load_corpus(demo_corpus_root()).cases
    return sum(case.expectations.reference_decision.value == decision for case in cases)


def test_always_permit_reviewer_exposes_every_false_approval_and_unsupported_permit(
    demo: tuple[ReportResult, dict[str, Any]],
) -> None:
    _, record = demo
    for name, decision in (("false_approval_rate", "deny"), ("unsupported_permit_rate", "hold")):
        n = _cases_deciding(decision)
        figure = _figure(record, "always-permit", name)
        assert (figure["numerator"], figure["denominator"]) == (n, n)  # per case
        per_trial = _figure(record, "always-permit", name + "_per_trial")
        assert (per_trial["numerator"], per_trial["denominator"]) == (2 * n, 2 * n)  # K=2


def test_always_deny_reviewer_fails_permitted_task_utility(
    demo: tuple[ReportResult, dict[str, Any]],
) -> None:
    _, record = demo
    n = _cases_deciding("permit")
    figure = _figure(record, "always-deny", "utility_loss_rate")
    assert (figure["numerator"], figure["denominator"]) == (n, n)  # per case
    per_trial = _figure(record, "always-deny", "utility_loss_rate_per_trial")
    assert (per_trial["numerator"], per_trial["denominator"]) == (2 * n, 2 * n)  # K=2


def test_random_reviewer_false_approvals_are_counted_per_case_with_the_trial_figure_beside(
    demo: tuple[ReportResult, dict[str, Any]],
) -> None:
    # Issue 53: two trials per case give a random reviewer two chances to permit a deny case;
    # the spec divides by cases, so the headline counts each deny case once, when any of its
    # trials permitted it. Counted here from the per-trial rows (evaluation ids are fresh each
    # run, so the random draws are too).
    result, record = demo
    permits: dict[str, list[bool]] = {}
    for row in iter_trial_rows(result.record_path.parent, "review"):
        if row["configuration"] == "random" and row["reference"] == "deny":
            permits.setdefault(row["case_id"], []).append(row["outcome"] == "permit")
    per_case = _figure(record, "random", "false_approval_rate")
    per_trial = _figure(record, "random", "false_approval_rate_per_trial")
    deny_cases = _cases_deciding("deny")
    assert (per_case["unit"], per_case["denominator"]) == ("case", len(permits))
    assert len(permits) == deny_cases
    assert (per_trial["unit"], per_trial["denominator"]) == ("trial", 2 * deny_cases)
    assert per_case["numerator"] == sum(any(trials) for trials in permits.values())
    assert per_trial["numerator"] == sum(sum(trials) for trials in permits.values())
    assert per_case["estimate"] > per_trial["estimate"]  # e.g. 0.54 per case, 0.32 per trial
    for interval in per_case["intervals"]:
        assert all(0.0 <= v <= 1.0 for v in (interval["lower"], interval["upper"]) if v is not None)


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


UNUSABLE = "Evaluability: why trials were unusable"
HEATMAP_JS = (
    "[...document.querySelectorAll('section summary')]"
    f".find(h => h.textContent === {UNUSABLE!r}).parentElement.querySelector('svg')"
)


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    value = hex_colour.lstrip("#")
    red, green, blue = (int(value[i : i + 2], 16) for i in (0, 2, 4))
    return red, green, blue


def _hue(rgb: tuple[int, int, int]) -> str:
    """`green`, `red` or `grey`: which colour of the heatmap's key a fill reads as."""
    red, green, blue = rgb
    if green > red and green >= blue:
        return "green"
    if red > green and red > blue:
        return "red"
    return "grey"


def test_evaluability_heatmap_is_drawn_in_the_colours_its_key_names(
    demo: tuple[ReportResult, dict[str, Any]],
) -> None:
    """Each cell of "why trials were unusable": valid green, missing / invalid / transport red,
    in the SVG the page embeds (cells are drawn row by row)."""
    result, record = demo
    text = result.html_path.read_text()
    start = text.index(f"<summary>{UNUSABLE}</summary>")
    svg = text[text.index("<svg", start) : text.index("</svg>", start)]
    fills = re.findall(r'<rect class="cell"[^>]*fill="(#[0-9a-f]{6})"', svg)
    table = text[text.index('<table class="confusion">', start) :]
    subjects = re.findall(r"<tr><th>([^<]+)</th><td", table[: table.index("</table>")])
    assert set(subjects) == set(record["evaluability"]["subjects"])
    columns = ["valid", "missing", "invalid", "transport_failed"]
    cells = fills
    assert len(cells) == len(subjects) * len(columns)
    hues = [_hue(_rgb(fill)) for fill in cells]
    assert hues == ["green", "red", "red", "red"] * len(subjects)
    assert "trial outcome (green: desired; red: error)" in svg
    # The sentinel that never answers fills its `missing` cell with a full-strength red.
    empty = subjects.index("empty")
    missing = _rgb(cells[empty * len(columns) + 1])
    assert missing[0] > 140 and missing[1] < 60, missing


FIRST_SCREEN = """(() => {
  const bottom = (el) => el.getBoundingClientRect().bottom + window.scrollY;
  const top = (el) => el.getBoundingClientRect().top + window.scrollY;
  const rows = [...document.querySelectorAll("#verdicts table.verdicts tbody tr")];
  return {verdicts_bottom: bottom(document.querySelector("#verdicts table.verdicts")),
          figures: rows.map(r => [r.cells[0].textContent, r.querySelector("td.headline-figures")
                                  .textContent, bottom(r)]),
          next_bottom: bottom(document.querySelector("#verdicts p.next")),
          system_top: top(document.querySelector("#system-under-test"))};
})()"""
"""Where the answer sits on the page: the candidates' verdict rows with their headline figures,
the next step and the system under test (document pixels)."""

OPEN_ALL = "document.querySelectorAll('details').forEach(d => { d.open = true; })"

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
    """The page a new user opens: the answer on its first 1280x900 screen, about 4,000 px with
    the details folded, verdicts first, drill-down filter working.

    Set TRUSTBENCH_SCREENSHOTS=<folder> to keep the PNG (docs/screenshots/ comes from here).
    """
    result, record = demo
    shots = Path(os.environ.get("TRUSTBENCH_SCREENSHOTS") or tmp_path)
    chromium, ws_url = start_chromium(tmp_path / "profile")

    async def inspect() -> tuple[float, Any, Any, Any, Any]:
        async with aiohttp.ClientSession() as http:
            browser = await Browser.open(http, ws_url, width=1280, height=900)
            await browser.send("Page.navigate", url=result.html_path.as_uri())
            await browser.html_after(None)
            height = await browser.page_height()
            first_screen = await browser.evaluate(FIRST_SCREEN)
            await browser.screenshot(shots / "report-review.png", max_height=2400)
            ids = await browser.evaluate(
                "[...document.querySelectorAll('section[id]')].map(s => s.id)"
            )
            await browser.evaluate(OPEN_ALL)  # the detail below: filter and heatmap
            filtered = await browser.evaluate(FILTER_AND_COUNT)
            heatmap = await browser.element_pixels(HEATMAP_JS)
            await browser.ws.close()
            return height, first_screen, ids, filtered, heatmap

    try:
        height, first_screen, ids, filtered, heatmap = asyncio.run(inspect())
    finally:
        chromium.terminate()
        chromium.wait(timeout=20)
    assert height < 4_200, f"report page is {height:.0f} px tall with its details folded"
    assert ids[:4] == ["verdicts", "system-under-test", "instruments", "gates"]
    # The first 1280x900 screen holds every candidate's verdict with its headline figures and
    # the interval bound each gate reads, the next step, and the start of the system under test.
    assert first_screen["verdicts_bottom"] <= 900 and first_screen["next_bottom"] <= 900
    assert first_screen["system_top"] < 900, first_screen
    figures = {name: text for name, text, _ in first_screen["figures"]}
    assert figures, "no candidate row in the verdict table"
    for name in ("false-approvals", "unsupported-permits"):
        assert all(f"{name}: " in text for text in figures.values()), figures
        assert all("95% upper bound" in text for text in figures.values()), figures
    # One row per case and reviewer configuration (the unchecked baseline has no reply).
    configurations = record["review"]["configurations"].values()
    reviewers = [c for c in configurations if c["kind"] != "unchecked"]
    cases = len(load_corpus(demo_corpus_root()).cases)  # the demo spec's corpus
    assert filtered["before"] == cases * len(reviewers)
    assert filtered["after"] == cases and filtered["all_match"]
    assert (shots / "report-review.png").read_bytes().startswith(b"\x89PNG")
    # Sampled from the rendered evaluability heatmap: its key says green and red, so both show
    # as strong colours, and no cell is drawn in the near-black grey of an unmarked scale.
    raw = heatmap.tobytes()
    pixels = list(zip(raw[0::3], raw[1::3], raw[2::3], strict=True))
    strong = {
        "green": sum(1 for r, g, b in pixels if g > r + 40 and g > b),
        "red": sum(1 for r, g, b in pixels if r > g + 60 and r > b + 40),
        "dark grey": sum(
            1 for r, g, b in pixels if max(r, g, b) < 90 and max(r, g, b) - min(r, g, b) < 12
        ),
    }
    assert strong["green"] > 0.02 * len(pixels) and strong["red"] > 0.02 * len(pixels), strong
    assert strong["dark grey"] < 0.02 * len(pixels), strong


def test_demo_record_carries_operating_measures_with_unknown_tokens_and_cost(
    demo: tuple[ReportResult, dict[str, Any]],
) -> None:
    """In-process reviewers report no tokens or cost: both stay null, never 0."""
    result, record = demo
    measures = record["review"]["operating_measures"]
    assert "unchecked" not in measures and len(measures) >= 7
    for name, each in measures.items():
        assert each["usage"]["prompt_tokens"] is None, name
        assert each["usage"]["cost_usd"] is None, name
        assert each["escalation_per_trial"]["answers"] == each["trials"] > 0, name
    chains = [m for m in measures.values() if m["added_by_chain"] is not None]
    assert chains and all(c["added_by_chain"]["added_reviewers"] == 1 for c in chains)
    assert "Operating measures" in result.html_path.read_text()
