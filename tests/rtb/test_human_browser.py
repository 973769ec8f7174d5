"""End to end in a real browser: two participants complete their sessions in headless Chromium,
driven over the Chrome DevTools Protocol (no Selenium or Playwright needed), against the app
started by its command line. Skips when no Chromium is installed (CI: `apt-get install -y
chromium`). Set TRUSTBENCH_SCREENSHOTS=<folder> to write the review and finished pages' PNGs
(the ones in docs/screenshots/ come from here)."""

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
from tests.rtb.test_human_fixtures import participant_answer, runs  # noqa: F401
from tests.support.browser import CHROMIUM, Browser, start_chromium
from tests.support.child_env import child_env
from tests.support.readiness import READY_TIMEOUT_S, LineReader

from trustbench.core import report_run

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (CI: apt-get install -y chromium)"
)


FILL = """(() => {
  const a = %s;
  document.querySelector(`input[name=decision][value=${a.decision}]`).checked = true;
  const tick = (name, value) =>
    document.querySelector(`input[name=${name}][value="${value}"]`).checked = true;
  for (const c of a.reason_codes) tick("reason_codes", c);
  for (const r of a.evidence_refs) tick("evidence_refs", r);
  document.querySelector('#explanation').value = a.explanation;
  document.querySelector('#submit').click();
  return true;
})()"""


async def review_session(browser: Browser, link: str, follow_ai: bool, shots: Path | None) -> int:
    await browser.send("Page.navigate", url=link)
    page = await browser.html_after(None)
    cases = 0
    while "Session complete" not in page:
        if shots is not None and cases == 0:
            await browser.screenshot(shots / "human-review-page.png")
        await browser.evaluate(FILL % json.dumps(participant_answer(page, follow_ai)))
        page = await browser.html_after(page)
        cases += 1
    if shots is not None:
        await browser.screenshot(shots / "human-session-finished.png")
    return cases


def ignore_sigint() -> None:
    """In the child before exec: SIGINT ignored, as a shell's background job inherits it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def start_server(
    run_dir: Path, *, sigint_ignored: bool = False
) -> tuple[subprocess.Popen[str], dict[str, str]]:
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from trustbench.rtb.human.cli import human_app; human_app()",
            "serve",
            str(run_dir),
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=child_env(run_dir.parent),
        preexec_fn=ignore_sigint if sigint_ignored else None,
    )
    assert server.stdout is not None
    found = LineReader(server.stdout).wait_for(
        server, r"^\s+(\S+): (http://127\.0\.0\.1:\d+/s/\S+)", until=r"^give each participant"
    )
    return server, {match.group(1): match.group(2) for match in found}


@pytest.mark.slow
def test_two_participants_in_headless_chromium_yield_a_report_with_the_visibility_split(
    runs: tuple[Path, Path],  # noqa: F811
) -> None:
    _, human_dir = runs
    shots_env = os.environ.get("TRUSTBENCH_SCREENSHOTS")
    shots = Path(shots_env) if shots_env else Path(tempfile.mkdtemp())
    server, links = start_server(human_dir)
    profile = Path(tempfile.mkdtemp())
    chromium, ws_url = start_chromium(profile)
    try:

        async def drive() -> tuple[int, int]:
            async with aiohttp.ClientSession() as http:
                browser = await Browser.open(http, ws_url)
                first = await review_session(browser, links["sre-cab-p01"], True, shots)
                second = await review_session(browser, links["sre-cab-p02"], False, None)
                await browser.ws.close()
                return first, second

        assert asyncio.run(drive()) == (12, 12)
    finally:
        chromium.terminate()
        chromium.wait(timeout=20)
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=READY_TIMEOUT_S) == 0
        shutil.rmtree(profile, ignore_errors=True)
    for name in ("human-review-page.png", "human-session-finished.png"):
        assert (shots / name).read_bytes().startswith(b"\x89PNG")
    record = json.loads(report_run(human_dir).record_path.read_text())["review"]
    assert {"sre-cab-p01", "sre-cab-p02"} <= set(record["configurations"])
    split = record["human"]["agreement_by_visibility"]
    assert split["visible"]["followed_ai_errors"] == 8
    assert split["not_visible"]["followed_ai_errors"] == 0
    assert len(record["human"]["participants"]["sre-cab-p01"]["time_on_task_s"]) == 12
