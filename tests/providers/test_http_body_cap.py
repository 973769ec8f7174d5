"""The response-size cap holds whether or not the server declares the body's length."""

from __future__ import annotations

import asyncio

from aiohttp import web
from aiohttp.test_utils import TestServer

from trustbench.providers._http import new_session, post_json
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


async def _declared_then_stall(request: web.Request) -> web.StreamResponse:
    """Declares 50,000 bytes, sends 5,000, then waits: only a client that stops at the cap ends."""
    response = web.StreamResponse(headers={"Content-Length": "50000"})
    await response.prepare(request)
    await response.write(b"z" * 5000)
    await asyncio.sleep(30)
    return response


async def _post(path: str, size: int, max_bytes: int) -> AttemptResult:
    app = web.Application()
    app.router.add_post("/stream", _stream)
    app.router.add_post("/declared", _declared)
    app.router.add_post("/stall", _declared_then_stall)
    async with TestServer(app, host="127.0.0.1") as server, new_session(1) as session:
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


def test_a_declared_body_over_the_cap_is_cut_and_flagged() -> None:
    result = asyncio.run(_post("declared", 50_000, 4096))
    assert result.error_class == "response_too_large"
    assert result.raw_response == "y" * 4096


def test_reading_stops_at_the_cap_without_waiting_for_the_declared_length() -> None:
    result = asyncio.run(_post("stall", 0, 4096))  # within the 10 s limit only if it stops
    assert result.error_class == "response_too_large"
    assert result.raw_response == "z" * 4096


def test_bodies_within_the_cap_are_read_whole_declared_or_not() -> None:
    for path, letter in (("stream", "x"), ("declared", "y")):
        result = asyncio.run(_post(path, 4096, 4096))
        assert result.raw_response == letter * 4096
        assert result.error_class == "malformed_response"  # not JSON, but read in full
