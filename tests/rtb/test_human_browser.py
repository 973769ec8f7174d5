"""End to end in a real browser: two participants complete their sessions in headless Chromium,
driven over the Chrome DevTools Protocol (no Selenium or Playwright needed), against the app
started by its command line. Skips when no Chromium is installed (CI: `apt-get install -y
chromium`). Set TRUSTBENCH_SCREENSHOTS=<folder> to write the review and finished pages' PNGs
(the ones in docs/screenshots/ come from here)."""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from tests.rtb.test_human_fixtures import participant_answer, runs  # noqa: F401
from tests.support.readiness import READY_TIMEOUT_S, LineReader

from trustbench.core import report_run

CHROMIUM = next(
    (
        found
        for name in ("chromium", "chromium-browser", "google-chrome")
        if (found := shutil.which(name))
    ),
    None,
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (CI: apt-get install -y chromium)"
)
SRC = Path(__file__).parents[2] / "src"


class CdpError(AssertionError):
    """The browser answered a DevTools command with an error."""


NAVIGATING = re.compile(r"navigated or closed|Cannot find context|Execution context was destroyed")
"""DevTools errors that only mean the page is between two documents."""


class Browser:
    """A minimal CDP client: one page, flattened session, JSON commands over a websocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, session_id: str) -> None:
        self.ws, self.session_id, self.ids = ws, session_id, itertools.count(1)

    @classmethod
    async def open(cls, http: aiohttp.ClientSession, url: str) -> Browser:
        ws = await http.ws_connect(url, max_msg_size=64 * 1024 * 1024)
        browser = cls(ws, "")
        target = await browser.send("Target.createTarget", url="about:blank")
        attached = await browser.send(
            "Target.attachToTarget", targetId=target["targetId"], flatten=True
        )
        browser.session_id = attached["sessionId"]
        await browser.send("Emulation.setDeviceMetricsOverride", width=1000, height=1250,
                           deviceScaleFactor=1, mobile=False)  # fmt: skip
        return browser

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self.ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if self.session_id:
            message["sessionId"] = self.session_id
        await self.ws.send_json(message)
        while True:
            reply = json.loads((await self.ws.receive(timeout=READY_TIMEOUT_S)).data)
            if reply.get("id") == ident:
                if "error" in reply:
                    raise CdpError(reply["error"].get("message", str(reply)))
                return reply["result"]

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    async def html_after(self, previous: str | None) -> str:
        """The page's HTML once a new document has loaded."""
        for _ in range(300):
            # One evaluation reads state and content together, so a half-parsed new document
            # (or the old one before navigation commits) is never taken for the loaded page.
            try:
                found = await self.evaluate(
                    "[document.readyState, document.documentElement.outerHTML]"
                )
            except CdpError as error:
                # Evaluating while the page navigates fails ("navigated or closed", "cannot
                # find context"): the new document is not there yet, which is what we wait for.
                if not NAVIGATING.search(str(error)):
                    raise
                found = None
            state, page = found if isinstance(found, list) else (None, None)
            if state == "complete" and page is not None and page != previous:
                return page
            await asyncio.sleep(0.02)
        raise AssertionError("page did not load")

    async def screenshot(self, path: Path) -> None:
        """The whole page as PNG, reduced to a 256-colour palette (flat UI colours survive)."""
        size = (await self.send("Page.getLayoutMetrics"))["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = await self.send(
            "Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True
        )
        from PIL import Image

        image = Image.open(io.BytesIO(base64.b64decode(shot["data"])))
        image.convert("RGB").quantize(colors=256).save(path, optimize=True)


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


def start_server(run_dir: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
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
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert server.stdout is not None
    found = LineReader(server.stdout).wait_for(
        server, r"^\s+(\S+): (http://127\.0\.0\.1:\d+/s/\S+)", until=r"^give each participant"
    )
    return server, {match.group(1): match.group(2) for match in found}


def start_chromium(profile: Path) -> tuple[subprocess.Popen[str], str]:
    assert CHROMIUM is not None
    browser = subprocess.Popen(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert browser.stderr is not None
    reader = LineReader(browser.stderr)
    try:
        found = reader.wait_for(browser, r"DevTools listening on (ws://\S+)")
    except AssertionError as error:
        browser.kill()
        pytest.skip(f"chromium did not open a DevTools endpoint: {error}")
    return browser, found[0].group(1)


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
