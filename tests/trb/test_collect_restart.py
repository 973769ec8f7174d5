"""Kill the collection server mid-session (SIGKILL) and restart it: nothing answered is lost,
and the session resumes at its next unanswered item with the form it was shown."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
from tests.support.child_env import child_env
from tests.support.readiness import READY_TIMEOUT_S, LineReader
from tests.trb.collect_fixtures import counterfactual_plan, frozen_collection, nonce, page_kind

from trustbench.core import read_ledger
from trustbench.trb.collect import export_collection


def start_server(folder: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """`trustbench trb collect serve FOLDER --port 0`; return it and its session links."""
    server = subprocess.Popen(
        [sys.executable, "-c", "from trustbench.trb.collect.cli import collect_app; collect_app()",
         "serve", str(folder), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=child_env(folder.parent),
    )  # fmt: skip
    assert server.stdout is not None
    found = LineReader(server.stdout).wait_for(
        server, r"^\s+(\S+): (http://127\.0\.0\.1:\d+/s/\S+)", until=r"^give each participant"
    )
    return server, {match.group(1): match.group(2) for match in found}


async def post_answers(link: str, count: int) -> str:
    """Answer `count` pages of a session like a browser would; return the page shown next."""
    origin = re.match(r"http://[^/]+", link)
    assert origin is not None
    async with aiohttp.ClientSession(headers={"Origin": origin.group(0)}) as http:
        page = await (await http.get(link)).text()
        for _ in range(count):
            if page_kind(page) == "item":
                data = {"nonce": nonce(page), "action": counterfactual_plan(page)}
                page = await (await http.post(f"{link}/answer", data=data)).text()
            else:
                data = {"nonce": nonce(page), "cause": "exogenous"}
                page = await (await http.post(f"{link}/attribute", data=data)).text()
        return page


def test_a_killed_server_restarts_at_the_next_unanswered_item_with_nothing_lost(
    tmp_path: Path,
) -> None:
    folder = frozen_collection(tmp_path)
    server, links = start_server(folder)
    try:
        before = asyncio.run(post_answers(links["p01"], 3))  # item 1 + its outcome, item 2
    finally:
        server.send_signal(signal.SIGKILL)  # no clean shutdown: nothing gets flushed late
        server.wait(timeout=READY_TIMEOUT_S)
    assert page_kind(before) == "outcome"
    kinds = [e["kind"] for e in read_ledger(folder).events]
    assert (kinds.count("collect_answer"), kinds.count("collect_attribution")) == (2, 1)
    server, links = start_server(folder)
    try:
        after = asyncio.run(post_answers(links["p01"], 0))
        assert page_kind(after) == "outcome" and nonce(after) == nonce(before)
        assert "item 2 of 8" in after
        done = asyncio.run(post_answers(links["p01"], 13))
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=READY_TIMEOUT_S) == 0
    assert page_kind(done) == "complete"
    report = export_collection(folder, tmp_path / "out")
    assert report["sessions"]["p01"]["complete"] == 8
    assert report["items"]["answered"] == 8
    events = read_ledger(folder).events
    assert [e["kind"] for e in events].count("collect_answer") == 8
    assert [e["kind"] for e in events].count("collect_serve_started") == 2
