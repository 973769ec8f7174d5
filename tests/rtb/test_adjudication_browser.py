"""Issue 50's check in a real browser: two reviewers' blind sessions, one disagreement, its
adjudication and `apply`, in headless Chromium (over the Chrome DevTools Protocol) against the
app started by `trustbench rtb adjudicate serve`. Skips when no Chromium is installed (CI:
`apt-get install -y chromium`). Set TRUSTBENCH_SCREENSHOTS=<folder> to write the reviewer's and
the adjudicator's pages as PNGs."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import aiohttp
import pytest
from tests.rtb.test_adjudication_app import (
    CASES,
    DISAGREEMENT,
    adjudication_form,
    adjudication_setup,
    answer,
    shown_case,
)
from tests.support.browser import CHROMIUM, Browser, start_chromium
from tests.support.child_env import child_env
from tests.support.readiness import READY_TIMEOUT_S, LineReader

from trustbench.rtb.adjudication import adjudication_report, apply_record, report_text
from trustbench.rtb.corpus import load_corpus

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (CI: apt-get install -y chromium)"
)

FILL = """(() => {
  const a = %s;
  document.querySelector(`input[name=decision][value=${a.decision}]`).checked = true;
  for (const f of a.facts_relied_on)
    document.querySelector(`input[name=facts_relied_on][value="${f}"]`).checked = true;
  for (const name of ["governing_rules", "evidence", "confidence", "notes"])
    document.querySelector(`#${name}`).value = a[name];
  document.querySelector('#submit').click();
  return true;
})()"""


def fill(form: list[tuple[str, str]]) -> str:
    """The script that fills the page's form as `form` says and submits it."""
    values: dict[str, object] = dict(form)
    values["facts_relied_on"] = [value for name, value in form if name == "facts_relied_on"]
    return FILL % json.dumps(values)


async def session(
    browser: Browser, link: str, who: str, corpus: Path, shots: Path | None
) -> list[str]:
    """Everything `who` is shown until nothing is left for them (a scripted person)."""
    await browser.send("Page.navigate", url=link)
    pages = [await browser.html_after(None)]
    while "All cases reviewed" not in pages[-1] and "Nothing to adjudicate" not in pages[-1]:
        if shots is not None and len(pages) == 1:
            await browser.screenshot(shots / f"adjudicate-{who}.png")
        if who == "adj-1":
            script = fill(adjudication_form(pages[-1], "permit"))
        else:
            script = fill(answer(pages[-1], corpus, who))
        await browser.evaluate(script)
        pages.append(await browser.html_after(pages[-1]))
        assert "Not recorded" not in pages[-1]
    return pages


def start_server(record: Path, roster: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    server = subprocess.Popen(
        [sys.executable, "-m", "trustbench", "rtb", "adjudicate", "serve", str(record),
         "--reviewers", str(roster), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=child_env(record.parent),
    )  # fmt: skip
    assert server.stdout is not None
    found = LineReader(server.stdout).wait_for(
        server, r"^\s+(\S+): (http://127\.0\.0\.1:\d+/s/\S+)", until=r"^give each participant"
    )
    return server, {match.group(1): match.group(2) for match in found}


@pytest.mark.slow
def test_two_blind_reviewers_and_an_adjudicator_in_chromium_then_apply_shows_the_split(
    tmp_path: Path,
) -> None:
    corpus, record, roster = adjudication_setup(tmp_path)
    shots_env = os.environ.get("TRUSTBENCH_SCREENSHOTS")
    shots = Path(shots_env) if shots_env else None
    server, links = start_server(record, roster)
    profile = Path(tempfile.mkdtemp())
    chromium, ws_url = start_chromium(profile)
    try:

        async def drive() -> dict[str, list[str]]:
            async with aiohttp.ClientSession() as http:
                browser = await Browser.open(http, ws_url)
                seen = {who: await session(browser, links[who], who, corpus, shots)
                        for who in ("rev-a", "rev-b", "adj-1")}  # fmt: skip
                await browser.ws.close()
                return seen

        seen = asyncio.run(drive())
    finally:
        chromium.terminate()
        chromium.wait(timeout=20)
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=READY_TIMEOUT_S) == 0
        shutil.rmtree(profile, ignore_errors=True)
    assert [len(seen["rev-a"]), len(seen["rev-b"]), len(seen["adj-1"])] == [4, 4, 2]
    assert {shown_case(page, corpus) for page in seen["rev-b"][:3]} == set(CASES)
    assert shown_case(seen["adj-1"][0], corpus) == DISAGREEMENT
    assert "rev-b reads a1 and decides permit" in seen["adj-1"][0]
    # The adjudicator found for permit where the label is hold: that case stays disputed.
    apply_record(record)
    statuses = {c.case_id: c.reference_status for c in load_corpus(corpus).cases}  # validates
    assert {case_id: statuses[case_id].status for case_id in CASES} == {
        "ho-02": "reviewed", "ho-03": "disputed", "ho-05": "reviewed",
    }  # fmt: skip
    assert sum(s.status == "authored" for s in statuses.values()) == 9
    assert len(statuses[DISAGREEMENT].disagreements) == 2  # rev-b's review, the adjudication
    text = report_text(adjudication_report(record))
    assert "2 reviewed" in text and "1 disputed" in text and "9 outside the protocol" in text
    assert "adjudicated by adj-1: permit (r5)" in text
