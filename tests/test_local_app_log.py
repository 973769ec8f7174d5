"""A request the local apps cannot even parse is the client's error: 400 and one log line."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiohttp import web

from trustbench._local_app import SERVER_LOGGER, app_runner, new_app


async def _page(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _send_raw(request: bytes) -> bytes:
    runner = app_runner(new_app({}, _page, _page))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        await writer.drain()
        answer = await reader.read(200)
        writer.close()
        return answer
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nno colon here\r\n\r\n",
        b"GET /\x00 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n",
    ],
)
def test_an_unparsable_request_is_answered_400_and_logged_in_one_line_without_a_traceback(
    caplog: pytest.LogCaptureFixture, request_bytes: bytes
) -> None:
    with caplog.at_level(logging.WARNING, logger=SERVER_LOGGER.name):
        answer = asyncio.run(_send_raw(request_bytes))
    assert answer.split(b"\r\n")[0].endswith(b" 400 Bad Request"), answer
    records = [r for r in caplog.records if r.name == SERVER_LOGGER.name]
    assert len(records) == 1
    assert records[0].exc_info is None and "answered 400" in records[0].getMessage()
    assert "\n" not in caplog.text.strip() and "Traceback" not in caplog.text


def test_a_body_that_cannot_be_decoded_is_logged_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    request = (
        b"POST /nothing HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Encoding: gzip\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n"
        b"Connection: close\r\n\r\nnotgzip"
    )
    with caplog.at_level(logging.WARNING, logger=SERVER_LOGGER.name):
        asyncio.run(_send_raw(request))
    assert "Traceback" not in caplog.text
    assert all(r.exc_info is None for r in caplog.records if r.name == SERVER_LOGGER.name)
