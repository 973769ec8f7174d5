"""The providers' connection pool (aiohttp): framing, keep-alive, caps and failures, raw servers.

Each test scripts the exact bytes a server sends, so framing (chunked, close-delimited,
compressed, interim responses) and the ways servers fail (closing a pooled connection, dropping
mid-body, garbage) are all exercised here, over 127.0.0.1. Real server software (uvicorn, nginx,
tinyproxy) is in `test_http_servers.py`.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import ssl
import subprocess
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.support.child_env import child_env
from tests.support.openai_server import read_request_head

from trustbench.providers._http import new_session, post_json
from trustbench.providers._pool import HttpPool, HttpTransportError
from trustbench.providers._types import AttemptResult

Respond = Callable[[asyncio.StreamWriter, int], Awaitable[bool]]
"""Writes the response to request number n (from 1); returns False to close the connection."""


@dataclass
class RawServer:
    """A server that reads each request and lets the test write the response bytes."""

    respond: Respond
    requests: list[tuple[int, bytes, dict[str, str], bytes]] = field(default_factory=list)
    connections: int = 0
    open_now: int = 0
    most_open: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while True:
                request_line, headers = await read_request_head(reader)
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.requests.append((number, request_line.encode(), headers, body))
                if not await self.respond(writer, len(self.requests)):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open_now -= 1
            writer.close()


async def _serve(respond: Respond, exchange: Callable[[str], Awaitable[Any]]) -> RawServer:
    raw = RawServer(respond)
    server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        await exchange(f"http://127.0.0.1:{port}/v1/chat/completions")
    finally:
        server.close()
    return raw


def _reply(body: bytes, *extra: str, status: str = "200 OK") -> bytes:
    head = "".join(f"{line}\r\n" for line in extra)
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{head}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _post_once(
    handle: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    result: AttemptResult,
    *,
    scheme: str = "http",
    host: str = "127.0.0.1",
    tls: ssl.SSLContext | None = None,
    timeout_s: float = 5.0,
) -> None:
    """One `post_json` through a fresh pool to a server running `handle` on 127.0.0.1."""
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    try:
        async with new_session(1) as pool:
            url = f"{scheme}://{host}:{port}/v1/chat/completions"
            await post_json(pool, url, {}, {}, timeout_s, result, 1000)
    finally:
        server.close()


def _always(data: bytes, keep: bool = True) -> Respond:
    async def respond(writer: asyncio.StreamWriter, number: int) -> bool:
        writer.write(data)
        await writer.drain()
        return keep

    return respond


async def _posts(pool: HttpPool, url: str, count: int) -> list[Any]:
    return [await pool.post(url, {}, b'{"n": %d}' % i, 1 << 20) for i in range(count)]


def test_sequential_requests_reuse_one_keep_alive_connection() -> None:
    seen: list[Any] = []

    async def exchange(url: str) -> None:
        async with new_session(4) as pool:
            seen.extend(await _posts(pool, url, 5))

    raw = asyncio.run(_serve(_always(_reply(b'{"ok": 1}')), exchange))
    assert raw.connections == 1 and len(raw.requests) == 5
    assert all(r.status == 200 and json.loads(r.body) == {"ok": 1} for r in seen)
    line, headers, body = raw.requests[0][1:]
    assert line == b"POST /v1/chat/completions HTTP/1.1"
    assert headers["content-length"] == "8" and body == b'{"n": 0}'
    assert headers["host"].startswith("127.0.0.1:") and headers["accept-encoding"] == "identity"


def test_a_connection_close_response_is_not_reused() -> None:
    async def exchange(url: str) -> None:
        async with new_session(4) as pool:
            assert [r.status for r in await _posts(pool, url, 3)] == [200, 200, 200]

    raw = asyncio.run(_serve(_always(_reply(b"{}", "Connection: close"), keep=False), exchange))
    assert raw.connections == 3


def test_a_pooled_connection_the_server_closed_is_not_reused() -> None:
    async def exchange(url: str) -> None:
        async with new_session(4) as pool:
            await _posts(pool, url, 1)
            await asyncio.sleep(0.1)  # the server has closed it (without saying so) by now
            assert (await pool.post(url, {}, b"{}", 100)).status == 200

    # The server answers with keep-alive framing, then closes the connection anyway.
    raw = asyncio.run(_serve(_always(_reply(b"{}"), keep=False), exchange))
    assert raw.connections == 2


def test_a_chunked_body_is_decoded() -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'4\r\n{"a"\r\n3\r\n: 1\r\n1\r\n}\r\n0\r\n\r\n'
    )
    got: list[Any] = []

    async def exchange(url: str) -> None:
        async with new_session(1) as pool:
            got.extend(await _posts(pool, url, 2))

    raw = asyncio.run(_serve(_always(chunked), exchange))
    assert [json.loads(r.body) for r in got] == [{"a": 1}, {"a": 1}] and raw.connections == 1


def test_a_body_ended_by_closing_the_connection_is_read_to_the_end() -> None:
    got: list[Any] = []

    async def exchange(url: str) -> None:
        async with new_session(1) as pool:
            got.append(await pool.post(url, {}, b"{}", 1 << 20))

    data = b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"whole": true}'
    asyncio.run(_serve(_always(data, keep=False), exchange))
    assert got[0].status == 200 and json.loads(got[0].body) == {"whole": True}


def test_an_interim_response_is_skipped() -> None:
    got: list[Any] = []

    async def exchange(url: str) -> None:
        async with new_session(1) as pool:
            got.append(await pool.post(url, {}, b"{}", 100))

    asyncio.run(_serve(_always(b"HTTP/1.1 100 Continue\r\n\r\n" + _reply(b"[1]")), exchange))
    assert got[0].status == 200 and got[0].body == b"[1]"


@pytest.mark.parametrize(
    ("coding", "encode"),
    [("gzip", gzip.compress), ("deflate", zlib.compress)],
)
def test_a_compressed_body_is_decoded(coding: str, encode: Callable[[bytes], bytes]) -> None:
    got: list[Any] = []

    async def exchange(url: str) -> None:
        async with new_session(1) as pool:
            got.append(await pool.post(url, {}, b"{}", 1000))

    body = encode(b'{"text": "' + b"x" * 500 + b'"}')
    asyncio.run(_serve(_always(_reply(body, f"Content-Encoding: {coding}")), exchange))
    assert json.loads(got[0].body) == {"text": "x" * 500} and not got[0].truncated


def test_a_compressed_body_over_the_cap_once_decoded_is_cut() -> None:
    got: list[Any] = []

    async def exchange(url: str) -> None:
        async with new_session(1) as pool:
            got.append(await pool.post(url, {}, b"{}", 20_000))

    bomb = gzip.compress(b"0" * 10_000_000)  # about 10 kB that decodes to 10 MB
    asyncio.run(_serve(_always(_reply(bomb, "Content-Encoding: gzip")), exchange))
    assert got[0].truncated and len(got[0].body) == 20_001


def _attempt() -> AttemptResult:
    return AttemptResult(request_body={}, requested_model="m", request_json=b"{}", endpoint=None)


def _post_json(respond: Respond, timeout_s: float = 5.0, **headers: str) -> AttemptResult:
    result = _attempt()

    async def exchange(url: str) -> None:
        async with new_session(1) as pool:
            await post_json(pool, url, headers, {}, timeout_s, result, 1000)

    asyncio.run(_serve(respond, exchange))
    return result


def test_an_unsupported_content_coding_is_a_connection_error_not_a_reply() -> None:
    result = _post_json(_always(_reply(b"\x00\x01", "Content-Encoding: br")))
    assert result.error_class == "connection_error"
    assert "content-encoding: brotli (br)" in (result.error_message or "")


def test_a_redirect_is_not_followed() -> None:
    result = _post_json(_always(_reply(b"{}", "Location: http://elsewhere/", status="307 X")))
    assert result.http_status == 307 and result.error_class == "client_error"


def test_a_body_cut_short_by_the_server_is_a_connection_error() -> None:
    async def respond(writer: asyncio.StreamWriter, number: int) -> bool:
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"partial":')
        await writer.drain()
        return False

    result = _post_json(respond)
    assert result.error_class == "connection_error" and result.reply is None
    assert "received 11 of 100 bytes" in (result.error_message or "")


def test_a_garbage_response_is_a_connection_error() -> None:
    result = _post_json(_always(b"SMTP ready\r\n\r\n", keep=False))
    assert result.error_class == "connection_error"
    assert "malformed HTTP response" in (result.error_message or "")


def test_a_server_that_closes_at_once_is_a_connection_error_not_a_timeout() -> None:
    result = _attempt()

    async def slam(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.transport.abort()

    asyncio.run(asyncio.wait_for(_post_once(slam, result, timeout_s=30.0), 10))
    assert result.error_class == "connection_error" and (result.latency_s or 99) < 5


def test_a_second_unasked_response_closes_the_connection() -> None:
    got: list[Any] = []

    async def exchange(url: str) -> None:
        async with new_session(1) as pool:
            got.extend(await _posts(pool, url, 2))

    two = _reply(b'{"first": 1}') + _reply(b'{"unasked": 2}')
    raw = asyncio.run(_serve(_always(two), exchange))
    assert [json.loads(r.body) for r in got] == [{"first": 1}, {"first": 1}]
    assert raw.connections == 2  # the extra answer never reaches the next request


def test_endless_response_headers_fail_fast() -> None:
    async def respond(writer: asyncio.StreamWriter, number: int) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\n")
        for index in range(10_000):
            writer.write(b"X-Filler-%d: %s\r\n" % (index, b"f" * 100))
        await writer.drain()
        await asyncio.sleep(5)
        return False

    result = _post_json(respond, timeout_s=30.0)
    assert result.error_class == "connection_error" and result.latency_s < 4  # not at 30 s
    assert "Too many headers" in (result.error_message or "")


def test_a_header_value_with_a_line_break_is_refused_before_anything_is_sent() -> None:
    result = _post_json(_always(_reply(b"{}")), Authorization="Bearer a\r\nX-Injected: 1")
    assert result.error_class == "connection_error"
    assert "line break" in (result.error_message or "")


def test_an_unreachable_endpoint_is_a_connection_error() -> None:
    result = _attempt()

    async def run() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()  # nothing listens on `port` now
        async with new_session(1) as pool:
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            await post_json(pool, url, {}, {}, 5.0, result)

    asyncio.run(run())
    assert result.error_class == "connection_error" and result.http_status is None


def test_a_timed_out_exchange_closes_its_connection_and_the_pool_goes_on() -> None:
    results = [_attempt(), _attempt()]

    async def respond(writer: asyncio.StreamWriter, number: int) -> bool:
        if number == 1:
            await asyncio.sleep(1.0)  # its answer comes late, on a connection given up on
        writer.write(_reply(b'{"n": %d}' % number))
        await writer.drain()
        return True

    async def exchange(url: str) -> None:
        async with new_session(1) as pool:
            await post_json(pool, url, {}, {}, 0.2, results[0], 1000)
            await post_json(pool, url, {}, {}, 5.0, results[1], 1000)

    raw = asyncio.run(_serve(respond, exchange))
    assert results[0].error_class == "timeout"
    assert results[1].error_class is None and json.loads(results[1].raw_response or "") == {"n": 2}
    assert raw.connections == 2  # the late answer of request 1 never reached request 2


def test_no_more_connections_are_open_than_the_limit() -> None:
    async def respond(writer: asyncio.StreamWriter, number: int) -> bool:
        await asyncio.sleep(0.02)
        writer.write(_reply(b"{}"))
        await writer.drain()
        return True

    async def exchange(url: str) -> None:
        async with new_session(3) as pool:
            await asyncio.gather(*(pool.post(url, {}, b"{}", 100) for _ in range(20)))

    raw = asyncio.run(_serve(respond, exchange))
    assert len(raw.requests) == 20 and raw.most_open <= 3


def test_a_closed_pool_refuses_requests() -> None:
    async def run() -> None:
        pool = new_session(1)
        await pool.close()
        with pytest.raises(HttpTransportError, match="closed"):
            await pool.post("http://127.0.0.1:9/", {}, b"{}", 10)

    asyncio.run(run())


def test_a_url_that_is_not_http_is_refused() -> None:
    async def run() -> None:
        async with new_session(1) as pool:
            with pytest.raises(HttpTransportError, match="not an http"):
                await pool.post("ftp://127.0.0.1/x", {}, b"{}", 10)

    asyncio.run(run())


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A certificate for 127.0.0.1 (and no other name), made with the openssl command."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
         "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, env=child_env(folder),
    )  # fmt: skip
    return cert, key


def _https_post(cert: str, key: str, host: str) -> AttemptResult:
    result = _attempt()

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    raw = RawServer(_always(_reply(b'{"tls": true}')))
    asyncio.run(_post_once(raw.handle, result, scheme="https", host=host, tls=context))
    return result


def test_https_works_with_a_certificate_the_trust_store_holds(
    self_signed: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", self_signed[0])  # read by the default trust store
    result = _https_post(*self_signed, "127.0.0.1")
    assert result.error_class is None and result.raw_response == '{"tls": true}'


def test_https_refuses_a_certificate_nobody_trusts(
    self_signed: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    result = _https_post(*self_signed, "127.0.0.1")
    assert result.error_class == "connection_error" and result.http_status is None
    assert "CERTIFICATE_VERIFY_FAILED" in (result.error_message or "")


def test_https_trusts_the_ca_bundle_requests_ca_bundle_names(
    self_signed: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As `requests` reads it: the bundle a user behind a TLS-inspecting proxy already has set.
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", self_signed[0])
    result = _https_post(*self_signed, "127.0.0.1")
    assert result.error_class is None and result.raw_response == '{"tls": true}'


def test_an_unreadable_requests_ca_bundle_fails_the_call_naming_the_variable(
    self_signed: tuple[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-bundle.pem"
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(missing))
    result = _https_post(*self_signed, "127.0.0.1")
    assert result.error_class == "connection_error" and result.http_status is None
    assert f"REQUESTS_CA_BUNDLE={str(missing)!r} cannot be read" in (result.error_message or "")


def test_https_refuses_a_certificate_for_another_name(
    self_signed: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", self_signed[0])
    result = _https_post(*self_signed, "localhost")  # the certificate names 127.0.0.1 only
    assert result.error_class == "connection_error" and result.http_status is None
    assert "mismatch" in (result.error_message or "")


def test_a_provider_given_another_kind_of_session_says_what_to_pass() -> None:
    from trustbench.providers import OpenAIChatProvider

    with pytest.raises(TypeError, match=r"new_session\(\.\.\.\) \(an HttpPool\), not builtins"):
        OpenAIChatProvider(object(), base_url="http://127.0.0.1:9/v1", model="m")
