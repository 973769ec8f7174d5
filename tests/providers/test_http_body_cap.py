"""The response-size cap holds whether or not the server declares the body's length."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from trustbench.providers._http import post_json
from trustbench.providers._types import AttemptResult


async def _stream(request: web.Request) -> web.StreamResponse:
    size = int(request.query["size"])
    response = web.StreamResponse()  # no Content-Length: chunked transfer encoding
    await response.prepare(request)
    for start in range(0, size, 1000):
        await response.write(b"x" * min(1000, size - start))
    await response.write_eof()
    return response


async def _declared(request: web.Request) -> web.Response:
    return web.Response(body=b"y" * int(request.query["size"]))  # Content-Length set


async def _post(path: str, size: int, max_bytes: int) -> AttemptResult:
    app = web.Application()
    app.router.add_post("/stream", _stream)
    app.router.add_post("/declared", _declared)
    async with TestServer(app, host="127.0.0.1") as server, aiohttp.ClientSession() as session:
        result = AttemptResult(
            request_body={}, requested_model="m", request_json=b"{}", endpoint=None
        )
        url = str(server.make_url(f"/{path}?size={size}"))
        await post_json(session, url, {}, {}, 10.0, result, max_bytes)
        return result


def test_a_chunked_body_over_the_cap_is_cut_and_flagged() -> None:
    result = asyncio.run(_post("stream", 50_000, 4096))
    assert result.error_class == "response_too_large"
    assert result.raw_response == "x" * 4096


def test_a_declared_body_over_the_cap_is_cut_and_flagged_without_reading_it_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def read_whole(self: aiohttp.ClientResponse) -> bytes:
        raise AssertionError("a body declared over the cap was read whole")

    monkeypatch.setattr(aiohttp.ClientResponse, "read", read_whole)
    result = asyncio.run(_post("declared", 50_000, 4096))
    assert result.error_class == "response_too_large"
    assert result.raw_response == "y" * 4096


def test_bodies_within_the_cap_are_read_whole_declared_or_not() -> None:
    for path, letter in (("stream", "x"), ("declared", "y")):
        result = asyncio.run(_post(path, 4096, 4096))
        assert result.raw_response == letter * 4096
        assert result.error_class == "malformed_response"  # not JSON, but read in full
