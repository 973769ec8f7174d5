"""A lean HTTP/1.1 client for the API providers: pooled keep-alive connections, one POST at a time.

Why not aiohttp here: at concurrency 64 against a local server, aiohttp's client cost 0.26 to
0.40 ms of CPU per request on the run's event loop; this client (an `asyncio.Protocol` with the
llhttp parser of `httptools`) costs 0.12 to 0.16 ms for the same requests (`python -m
bench.latency_bound` prints both bare clients: the floor and the lean floor). At 2,000 trials
that was most of what kept `trustbench run` above the bare-client floor. It does only what a
provider call needs and nothing hidden:

- **No redirects followed, no proxies, no cookies**: the endpoint frozen in the manifest is the
  one called; a 3xx is an error status like any other non-2xx.
- **No retries**: a request that fails is one failed attempt (the runner records it and applies
  the declared retry policy). A pooled connection the server has closed is never reused.
- **Bounded reads**: at most `max_bytes + 1` body bytes are kept; once the cap is passed the
  connection is closed without reading further, whatever length the server declared.
- Framing by `Content-Length`, chunked transfer coding, or (HTTP/1.0 style) the end of the
  connection; `gzip` / `deflate` bodies are decoded within the same cap, though
  `Accept-Encoding: identity` asks servers not to compress. TLS uses the system's default
  trust store (`ssl.create_default_context`), with hostname checks.

Every failure is `HttpTransportError` (or an `OSError` from connecting), which the providers
classify as `connection_error`.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import zlib
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import cast
from urllib.parse import urlsplit

import httptools

from trustbench import __version__

IDLE_TIMEOUT_S = 15.0
"""A pooled connection idle for longer is closed rather than reused (servers drop idle ones)."""

MAX_HEADER_BYTES = 65536
"""Largest response head accepted: a server streaming headers forever fails fast, not at the
call's timeout with the headers in memory."""

_NO_BODY_STATUSES = frozenset({204, 304})


class HttpTransportError(Exception):
    """The exchange failed: connection lost, malformed response, bad header value."""


@dataclass(frozen=True)
class HttpResponse:
    """What came back: status, headers (names lower-case), the body as kept, and whether cut."""

    status: int
    headers: dict[str, str]
    body: bytes
    truncated: bool
    """True when the body passed `max_bytes`: `body` then holds `max_bytes + 1` bytes or more."""


@dataclass(frozen=True)
class _Origin:
    scheme: str
    host: str
    port: int

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def _split(url: str) -> tuple[_Origin, str]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HttpTransportError(f"not an http(s) URL: {url!r}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as error:
        raise HttpTransportError(f"bad port in {url!r}: {error}") from None
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Origin(parts.scheme, parts.hostname, port), target


class _Connection(asyncio.Protocol):
    """One keep-alive connection: parses responses with llhttp, one exchange at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.idle_since = time.monotonic()
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[HttpResponse] | None = None
        self._max_bytes = 0
        self._keep_alive = False
        self._reset()

    def _reset(self) -> None:
        self._header_pairs: list[tuple[bytes, bytes]] = []
        self._header_bytes = 0
        self._headers: dict[str, str] | None = None
        self._chunks: list[bytes] = []
        self._size = 0
        self._status = 0

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's, as in Ray's workers, is not an asyncio.Transport subclass).
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # bytes nobody asked for: the connection's state is unknown
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._fail(HttpTransportError(f"malformed HTTP response: {error}"))

    def eof_received(self) -> bool | None:
        return None  # let the transport close; `connection_lost` follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self._waiter is None or self._waiter.done():
            return
        if exc is None and self._headers is not None and self._close_delimited():
            self._complete(truncated=False)  # a clean end of stream ends such a body (a reset not)
            return
        detail = f": {exc}" if exc is not None else ""
        self._fail(HttpTransportError(f"the server closed the connection{detail}"))

    # httptools callbacks
    def on_message_begin(self) -> None:
        if self._waiter is None or self._waiter.done():  # a response nobody asked for
            self.close()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_pairs.append((name, value))
        self._header_bytes += len(name) + len(value) + 4
        if self._header_bytes > MAX_HEADER_BYTES:
            self._fail(HttpTransportError(f"response headers exceed {MAX_HEADER_BYTES} bytes"))

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()
        headers: dict[str, str] = {}
        for name, value in self._header_pairs:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        self._headers = headers

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)
        self._size += len(body)
        if self._size > self._max_bytes:
            self._complete(truncated=True)
            self.close()  # the rest is never read

    def on_message_complete(self) -> None:
        if 100 <= self._status < 200:  # an interim response: the real one follows
            self._reset()
            return
        self._keep_alive = self._parser.should_keep_alive()  # asked while the message is current
        self._complete(truncated=False)

    # the exchange
    def _close_delimited(self) -> bool:
        headers = self._headers or {}
        return (
            "content-length" not in headers
            and "chunked" not in headers.get("transfer-encoding", "").lower()
            and self._status not in _NO_BODY_STATUSES
        )

    def _complete(self, *, truncated: bool) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        response = HttpResponse(
            self._status, self._headers or {}, b"".join(self._chunks), truncated
        )
        waiter.set_result(response)

    def _fail(self, error: Exception) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        self.close()

    async def exchange(self, request: bytes, max_bytes: int) -> HttpResponse:
        """Send one request and wait for its whole response (or the cap, or a failure)."""
        assert self.transport is not None
        if self.lost:  # closed by the server between connecting and sending
            raise HttpTransportError("the server closed the connection before the request")
        self._reset()
        self._keep_alive = False
        self._max_bytes = max_bytes
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            self.transport.write(request)
            return await self._waiter
        finally:
            self._waiter = None
            self.idle_since = time.monotonic()

    @property
    def reusable(self) -> bool:
        """Open, its last response complete and framed, and the server agreed to keep it."""
        return (
            not self.lost
            and self.transport is not None
            and not self.transport.is_closing()
            and self._keep_alive
        )

    def close(self) -> None:
        """Close now (aborting: whatever is unread is dropped)."""
        self.lost = True
        if self.transport is not None:
            self.transport.abort()


class HttpPool:
    """The run's shared connections: at most `limit` open at once, reused per origin.

    Use as an async context manager (`async with new_session(n) as pool`) or call `close`.
    Created anywhere; it binds to the event loop of its first request.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 1)
        self._slots: asyncio.Semaphore | None = None
        self._idle: dict[_Origin, deque[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._tls: ssl.SSLContext | None = None
        self._targets: dict[str, tuple[_Origin, str]] = {}
        self.closed = False

    async def __aenter__(self) -> HttpPool:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every connection; later requests fail."""
        self.closed = True
        for connection in list(self._open):
            connection.close()
        self._open.clear()
        self._idle.clear()

    async def post(
        self, url: str, headers: dict[str, str], body: bytes, max_bytes: int
    ) -> HttpResponse:
        """POST `body` to `url` and return the response, its body kept up to the cap.

        Raises:
            HttpTransportError: the URL or a header value is unusable, or the exchange failed.
            OSError: connecting failed (refused, unreachable, TLS).
        """
        if self.closed:
            raise HttpTransportError("the HTTP pool is closed")
        target = self._targets.get(url)
        if target is None:
            target = self._targets[url] = _split(url)
        origin, path = target
        request = _request_bytes(origin, path, headers, body)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limit)
        async with self._slots:
            connection = self._idle_connection(origin) or await self._connect(origin)
            keep = False
            try:
                response = await connection.exchange(request, max_bytes)
                keep = not response.truncated and connection.reusable
            finally:
                if keep:
                    self._idle.setdefault(origin, deque()).append(connection)
                else:
                    connection.close()
                    self._open.discard(connection)
        return _decoded(response, max_bytes)

    def _idle_connection(self, origin: _Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if connection.reusable and now - connection.idle_since < IDLE_TIMEOUT_S:
                return connection
            connection.close()
            self._open.discard(connection)
        return None

    async def _connect(self, origin: _Origin) -> _Connection:
        if len(self._open) >= self.limit:  # over the limit only by idle ones: drop the oldest
            self._drop_one_idle()
        tls: ssl.SSLContext | None = None
        if origin.scheme == "https":
            if self._tls is None:
                self._tls = ssl.create_default_context()
            tls = self._tls
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(
            _Connection,
            origin.host,
            origin.port,
            ssl=tls,
            server_hostname=origin.host if tls is not None else None,
        )
        self._open.add(connection)
        return connection

    def _drop_one_idle(self) -> None:
        for idle in self._idle.values():
            if idle:
                connection = idle.popleft()
                connection.close()
                self._open.discard(connection)
                return


def require_pool(session: object) -> HttpPool:
    """`session` if it is an `HttpPool`; a clear error for what callers passed before (aiohttp).

    Raises:
        TypeError: naming what was passed and what to pass instead.
    """
    if not isinstance(session, HttpPool):
        raise TypeError(
            f"the provider's session must be trustbench.providers.new_session(...) (an HttpPool), "
            f"not {type(session).__module__}.{type(session).__qualname__}"
        )
    return session


_USER_AGENT = f"trustbench/{__version__}"


def _request_bytes(origin: _Origin, path: str, headers: dict[str, str], body: bytes) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {origin.host_header}",
        f"User-Agent: {_USER_AGENT}",
        "Accept: application/json",
        "Accept-Encoding: identity",
    ]
    for name, value in headers.items():
        if any(c in name for c in "\r\n:") or "\r" in value or "\n" in value:
            raise HttpTransportError(f"header {name!r} contains a line break or a colon")
        lines.append(f"{name}: {value}")
    lines.append(f"Content-Length: {len(body)}")
    try:
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    except UnicodeEncodeError as error:
        raise HttpTransportError(f"a header is not Latin-1 text: {error}") from None
    return head + body


def _decoded(response: HttpResponse, max_bytes: int) -> HttpResponse:
    """Undo a `gzip` / `deflate` content coding, keeping at most `max_bytes + 1` decoded bytes."""
    coding = response.headers.get("content-encoding", "identity").strip().lower()
    if coding in ("", "identity"):
        return response
    if coding not in ("gzip", "x-gzip", "deflate"):
        raise HttpTransportError(f"unsupported Content-Encoding {coding!r}")
    wbits = 16 + zlib.MAX_WBITS if coding != "deflate" else zlib.MAX_WBITS
    try:
        data = _inflate(response.body, wbits, max_bytes)
    except zlib.error:
        if coding != "deflate":
            raise HttpTransportError("the gzip body cannot be decoded") from None
        try:  # some servers send raw deflate under "deflate"
            data = _inflate(response.body, -zlib.MAX_WBITS, max_bytes)
        except zlib.error:
            raise HttpTransportError("the deflate body cannot be decoded") from None
    headers = {k: v for k, v in response.headers.items() if k != "content-encoding"}
    # An encoded body cut at the cap decodes as far as it goes, and stays cut.
    return HttpResponse(response.status, headers, data, response.truncated or len(data) > max_bytes)


def _inflate(data: bytes, wbits: int, max_bytes: int) -> bytes:
    """Decode at most `max_bytes + 1` bytes; a stream cut short decodes as far as it goes."""
    decoder = zlib.decompressobj(wbits)
    return decoder.decompress(data, max_bytes + 1)
