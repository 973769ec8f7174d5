"""Shared set-up of the collection tests: a tiny source corpus, a protocol, page parsing."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from trustbench.trb.collect import freeze_protocol
from trustbench.trb.collect._app import CollectionRun
from trustbench.trb.corpus._generate import generate_split
from trustbench.trb.corpus._store import write_corpus

PROTOCOL = """
description = "test collection"
[corpus]
path = "source"
[items]
max_traces = 1
steps = [0, 1]
r_prime_slots = ["goal", "belief", "planned_next", "confidence"]
exogenous_change_probability = 0.5
seed = 3
[session]
participants_per_item = 2
time_limit_s = 60
show_model_continuation = false
required_qualifications = ["consent"]
[[participants]]
id = "p01"
split = "eval"
qualifications = ["consent"]
[[participants]]
id = "p02"
split = "eval"
qualifications = ["consent"]
"""
"""Two participants, one eval trace, its first two evaluated steps, every r' kind: 8 items each,
all of them Track 3 outcome items (neither step is the trace's last)."""


def frozen_collection(tmp_path: Path, protocol: str = PROTOCOL) -> Path:
    """Write the source corpus and protocol under `tmp_path`, freeze, return the folder."""
    write_corpus(tmp_path / "source", {"eval": generate_split("eval", 2, seed=11)})
    (tmp_path / "protocol.toml").write_text(protocol, encoding="utf-8")
    folder = tmp_path / "collection"
    freeze_protocol(tmp_path / "protocol.toml", folder)
    return folder


def page_kind(page: str) -> str:
    """`item`, `outcome`, `complete` or `withdrawn`, from the page's own text."""
    if "Session complete" in page:
        return "complete"
    if "You have withdrawn" in page:
        return "withdrawn"
    return "outcome" if "/attribute" in page else "item"


def nonce(page: str) -> str:
    """The hidden nonce of the page's form."""
    found = re.search(r'name="nonce" value="([0-9a-f]+)"', page)
    assert found, page[:2000]
    return found.group(1)


def counterfactual_plan(page: str) -> str:
    """A participant's answer: the planned move stated in r' (the third reasoning cell)."""
    row = re.search(r"<th>planned next move</th><td>[^<]*</td><td[^>]*>([^<]*)</td>", page)
    assert row, page[:2000]
    return {"move left": "left", "move right": "right"}.get(row.group(1), "stay")


Driver = Callable[[TestClient, dict[str, str]], Awaitable[Any]]


def serve(folder: Path, driver: Driver, origin: bool = True) -> Any:
    """Open the folder for serving, run `driver(client, {participant: token})`, close it."""

    async def main() -> Any:
        with CollectionRun(folder) as served:
            assert served.app is not None
            tokens = {who: token for token, who in served.tokens.items()}
            async with TestClient(TestServer(served.app, host="127.0.0.1")) as client:
                if origin:
                    client.session.headers["Origin"] = str(client.make_url("")).rstrip("/")
                return await driver(client, tokens)

    return asyncio.run(main())
