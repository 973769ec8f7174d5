"""Screenshot report pages in headless Chromium: `python -m tests.support.report_screenshots`.

Usage: `python -m tests.support.report_screenshots OUT_DIR NAME=RUN_DIR [NAME=RUN_DIR ...]`
writes `OUT_DIR/report-NAME.png`, the top 2,400 CSS pixels of each run's `report.html` (what a
reader sees first), and prints each page's full height. The control, workflow and TRB pictures
in docs/screenshots/ come from here (the reviewer one from tests/rtb/test_review_track_demo.py).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

import aiohttp
from tests.support.browser import Browser, start_chromium

TOP_PX = 2400
"""Height kept in each screenshot (CSS pixels)."""


async def _shoot(ws_url: str, pages: dict[str, Path], out: Path) -> None:
    async with aiohttp.ClientSession() as http:
        browser = await Browser.open(http, ws_url)
        previous = None
        for name, html in pages.items():
            await browser.send("Page.navigate", url=html.resolve().as_uri())
            previous = await browser.html_after(previous)
            height = await browser.page_height()
            await browser.screenshot(out / f"report-{name}.png", max_height=TOP_PX)
            print(f"{name}: {html} is {height:.0f} px tall")
        await browser.ws.close()


def main(argv: list[str]) -> None:
    """Screenshot each `NAME=RUN_DIR` into `OUT_DIR` (see the module docstring)."""
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    pages = {
        name: Path(run_dir) / "report.html"
        for name, run_dir in (item.split("=", 1) for item in argv[1:])
    }
    chromium, ws_url = start_chromium(Path(tempfile.mkdtemp()))
    try:
        asyncio.run(_shoot(ws_url, pages, out))
    finally:
        chromium.terminate()
        chromium.wait(timeout=20)


if __name__ == "__main__":
    main(sys.argv[1:])
