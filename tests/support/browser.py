"""A minimal headless-Chromium driver over the Chrome DevTools Protocol (no Selenium/Playwright).

Shared by the browser tests (the human-review app, the report screenshots): start Chromium on a
free DevTools port, attach to one page, evaluate JavaScript, take whole-page screenshots
quantised to a 256-colour palette (flat UI colours survive and the PNGs stay small). Tests skip
when no Chromium is installed (CI: `apt-get install -y chromium`).
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import io
import itertools
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from tests.support.child_env import child_env
from tests.support.readiness import READY_TIMEOUT_S, LineReader

CHROMIUM = next(
    (
        found
        for name in ("chromium", "chromium-browser", "google-chrome")
        if (found := shutil.which(name))
    ),
    None,
)
"""The Chromium executable on PATH, or `None`."""


class CdpError(AssertionError):
    """The browser answered a DevTools command with an error."""


NAVIGATING = re.compile(r"navigated or closed|Cannot find context|Execution context was destroyed")
"""DevTools errors that only mean the page is between two documents."""


class Browser:
    """A minimal CDP client: one page, flattened session, JSON commands over a websocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, session_id: str) -> None:
        self.ws, self.session_id, self.ids = ws, session_id, itertools.count(1)

    @classmethod
    async def open(
        cls, http: aiohttp.ClientSession, url: str, width: int = 1000, height: int = 1250
    ) -> Browser:
        """Attach to a new blank page of the browser at DevTools websocket `url`."""
        ws = await http.ws_connect(url, max_msg_size=64 * 1024 * 1024)
        browser = cls(ws, "")
        target = await browser.send("Target.createTarget", url="about:blank")
        attached = await browser.send(
            "Target.attachToTarget", targetId=target["targetId"], flatten=True
        )
        browser.session_id = attached["sessionId"]
        await browser.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                           deviceScaleFactor=1, mobile=False)  # fmt: skip
        return browser

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events in between are skipped)."""
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
        """Evaluate a JavaScript expression in the page and return its JSON value."""
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
                # Evaluating while the page navigates fails ("navigated or closed", "cannot find
                # context"): the new document is not there yet, which is what we wait for. Seen
                # on a loaded machine (load average 8 on 2 cores).
                if not NAVIGATING.search(str(error)):
                    raise
                found = None
            state, page = found if isinstance(found, list) else (None, None)
            if state == "complete" and page is not None and page != previous:
                return page
            await asyncio.sleep(0.02)
        raise AssertionError("page did not load")

    async def page_height(self) -> float:
        """The laid-out document's height in CSS pixels."""
        return float((await self.send("Page.getLayoutMetrics"))["cssContentSize"]["height"])

    async def screenshot(self, path: Path, max_height: float | None = None) -> None:
        """The page as PNG, reduced to a 256-colour palette (flat UI colours survive).

        Args:
            path: Where to write the PNG.
            max_height: Keep only the top this many CSS pixels (what a reader sees first);
                `None` for the whole page.
        """
        size = (await self.send("Page.getLayoutMetrics"))["cssContentSize"]
        height = size["height"] if max_height is None else min(size["height"], max_height)
        clip = {"x": 0, "y": 0, "width": size["width"], "height": height, "scale": 1}
        shot = await self.send(
            "Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True
        )
        from PIL import Image

        image = Image.open(io.BytesIO(base64.b64decode(shot["data"])))
        image.convert("RGB").quantize(colors=256).save(path, optimize=True)

    async def element_pixels(self, selector_js: str) -> Any:
        """The pixels of one element as rendered (a PIL RGB image), to sample its colours.

        Args:
            selector_js: A JavaScript expression that yields the element.
        """
        rect = await self.evaluate(
            f"(() => {{ const r = ({selector_js}).getBoundingClientRect();"
            " return {x: r.x + window.scrollX, y: r.y + window.scrollY,"
            " width: r.width, height: r.height}; })()"
        )
        shot = await self.send(
            "Page.captureScreenshot",
            format="png",
            clip={**rect, "scale": 1},
            captureBeyondViewport=True,
        )
        from PIL import Image

        return Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")


def start_chromium(profile: Path) -> tuple[subprocess.Popen[str], str]:
    """Start headless Chromium with a DevTools endpoint; skip the test if none opens.

    Returns:
        The process (terminate it when done) and its DevTools websocket URL.
    """
    assert CHROMIUM is not None
    # Chromium puts its singleton socket under TMPDIR, and a Unix socket path holds at most 107
    # bytes: a folder inside pytest's long tmp path (child_env's TMPDIR) makes it exit at start.
    # So its temporary files go to a short folder of their own, removed when the tests end.
    short_tmp = tempfile.mkdtemp(prefix="tb-chromium-")
    atexit.register(shutil.rmtree, short_tmp, ignore_errors=True)
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
        env=child_env(profile, extra={"TMPDIR": short_tmp}),
    )
    assert browser.stderr is not None
    reader = LineReader(browser.stderr)
    try:
        found = reader.wait_for(browser, r"DevTools listening on (ws://\S+)")
    except AssertionError as error:
        browser.kill()
        pytest.skip(f"chromium did not open a DevTools endpoint: {error}")
    return browser, found[0].group(1)
