"""The run's HTTP connection pool for the API providers, on aiohttp.

aiohttp does the HTTP (framing, chunked and compressed bodies, TLS, proxies, keep-alive); this
module fixes how trustbench uses it, so nothing hidden happens between the recorded attempts:

- **Proxies from the environment, as `trust_env` reads them**: `HTTP_PROXY`, `HTTPS_PROXY`,
  `NO_PROXY` (and credentials in the proxy URL). They are looked up once per endpoint per pool
  with aiohttp's own `get_env_proxy_for_url` and passed as `proxy=`: a session with
  `trust_env=True` repeats that lookup in a worker thread on every request and also reads
  `~/.netrc` for the *endpoint*, which would add credentials nobody declared (and collide with
  the provider's `Authorization` header).
- **TLS** with `ssl.create_default_context()`, made when the pool first calls an `https` URL, so
  `SSL_CERT_FILE` / `SSL_CERT_DIR` set before the run are honoured; hostnames are checked.
  `REQUESTS_CA_BUNDLE`, when set, names the CA bundle (a file, or a folder of hashed
  certificates) trusted instead of the default store, as `requests` reads it: a user behind a
  TLS-inspecting proxy usually has it set already, and ignoring it made every call fail
  certificate verification.
- **No redirects** (`allow_redirects=False`: a 3xx is returned as it is, and the providers make
  it a `client_error`), **no cookies** (`DummyCookieJar`), **no retries**: POST is never retried
  by aiohttp, so a failed request is one failed attempt, which the runner records and retries
  under the declared policy.
- **A pooled connection the server closed is not reused.** aiohttp reuses an idle connection
  while the event loop has not yet read the server's FIN, which under load is most of them
  against a server that closes after each response without saying so. So before a pooled
  connection is handed out, the event loop gets one turn to read what is already in its socket
  buffer (a FIN included); a connection found closing then is dropped, not reused. Where the
  close still comes too late (the request fails before any response: `ServerDisconnectedError`,
  a reset), that attempt fails as a connection error and the same request sent again goes on a
  fresh connection: the runner's retry of it, recorded as its own attempt, cannot meet the same
  fault.
- **Bounded reads**: at most `max_bytes + 1` body bytes are read (after decoding); once the cap
  is passed the connection is dropped without reading further, whatever length was declared.
  `Accept-Encoding: identity` asks servers not to compress.

Every failure is `HttpTransportError` or an `OSError` (the providers classify both as
`connection_error`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from trustbench import __version__

if TYPE_CHECKING:  # ssl (with the TLS context) only when a pool first calls an https URL
    import ssl

    import aiohttp
    from yarl import URL

MAX_HEADER_BYTES = 65536
"""Largest response header line / field accepted: a server streaming headers forever fails
fast, not at the call's timeout."""

_USER_AGENT = f"trustbench/{__version__}"
_FIXED_HEADERS = {
    "User-Agent": _USER_AGENT,
    "Accept": "application/json",
    "Accept-Encoding": "identity",
}
_MAX_FRESH_MARKS = 10_000
"""Requests remembered for a fresh-connection resend (a bound; a forgotten one just reuses)."""


class HttpTransportError(Exception):
    """The exchange failed: connection lost, malformed response, unusable URL or header."""


class StaleConnectionError(HttpTransportError):
    """The connection closed before any response: the request is resent on a fresh one."""


@dataclass(frozen=True)
class HttpResponse:
    """What came back: status, headers (case-insensitive), the body as kept, and whether cut."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    truncated: bool
    """True when the body passed `max_bytes`: `body` then holds `max_bytes + 1` bytes or more."""


@dataclass(frozen=True)
class _Target:
    url: URL
    proxy: URL | None
    proxy_auth: aiohttp.BasicAuth | None
    tls: bool


class HttpPool:
    """The run's shared connections: at most `limit` open at once, reused per origin.

    Use as an async context manager (`async with new_session(n) as pool`) or call `close`.
    Created anywhere; the aiohttp session is made on the first request, in its event loop, and
    aiohttp is imported by `load_client` (each HTTP provider calls it when made) or by then.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 1)
        self.closed = False
        self._session: aiohttp.ClientSession | None = None
        self._fresh_session: aiohttp.ClientSession | None = None
        self._tls: ssl.SSLContext | None = None
        self._targets: dict[str, _Target] = {}
        self._resend_fresh: set[tuple[str, bytes]] = set()

    def load_client(self) -> None:
        """Import aiohttp now, if not yet: what an HTTP provider calls when it is made.

        The pool itself does not need it until its first session (a run with nothing left to
        send, or only in-process candidates, never loads it), but a provider's first request
        must not pay its import (about 0.2 s) inside the exchange it times and bounds.
        """
        import trustbench.providers._connector  # noqa: F401  # pyright: ignore[reportUnusedImport]

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
        for session in (self._session, self._fresh_session):
            if session is not None:
                await session.close()
        self._session = self._fresh_session = None

    def _new_session(self, *, fresh: bool) -> aiohttp.ClientSession:
        from trustbench.providers._connector import client_session  # aiohttp: on first use

        return client_session(
            self.limit, fresh=fresh, max_header_bytes=MAX_HEADER_BYTES, headers=_FIXED_HEADERS
        )

    def _target(self, url: str) -> _Target:
        target = self._targets.get(url)
        if target is not None:
            return target
        from trustbench.providers._connector import URL, env_proxy  # aiohttp: on first use

        parsed = URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise HttpTransportError(f"not an http(s) URL: {url!r}")
        proxy, proxy_auth = env_proxy(parsed)
        tls = parsed.scheme == "https"
        if tls and self._tls is None:
            self._tls = tls_context()
        target = self._targets[url] = _Target(parsed, proxy, proxy_auth, tls)
        return target

    def proxy_for(self, url: str) -> str | None:
        """The proxy this pool sends `url` through (from the environment), None for direct."""
        proxy = self._target(url).proxy
        return str(proxy) if proxy is not None else None

    async def post(
        self, url: str, headers: dict[str, str], body: bytes, max_bytes: int
    ) -> HttpResponse:
        """POST `body` to `url` and return the response, its body kept up to the cap.

        Raises:
            HttpTransportError: the URL or a header value is unusable, or the exchange failed
                (`StaleConnectionError` when the connection closed before any response).
            OSError: connecting failed (refused, unreachable, TLS).
        """
        if self.closed:
            raise HttpTransportError("the HTTP pool is closed")
        import aiohttp  # imported by `_target` already; here for the errors caught below

        target = self._target(url)
        _check_header_values(headers)
        mark = (url, body)
        fresh = bool(self._resend_fresh) and mark in self._resend_fresh
        if fresh:
            self._resend_fresh.discard(mark)
        session = self._session_for(fresh=fresh)
        options = self._request_options(target)
        try:
            async with session.post(target.url, data=body, headers=headers, **options) as reply:
                return await _read_capped(reply, max_bytes)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as error:
            if isinstance(error, aiohttp.ClientConnectorError):  # connecting failed: not stale
                raise
            if len(self._resend_fresh) >= _MAX_FRESH_MARKS:
                self._resend_fresh.clear()
            self._resend_fresh.add(mark)
            raise StaleConnectionError(
                f"the connection closed before a response arrived ({type(error).__name__}: "
                f"{error}); this request is resent on a fresh connection"
            ) from None
        except aiohttp.ClientResponseError as error:  # malformed response, headers too long
            raise HttpTransportError(f"malformed HTTP response: {error.message}") from None
        except aiohttp.ClientPayloadError as error:  # body cut short, bad chunking or coding
            raise HttpTransportError(f"the response body could not be read: {error}") from None
        except aiohttp.ClientError as error:
            raise HttpTransportError(f"{type(error).__name__}: {error}") from None

    def _request_options(self, target: _Target) -> dict[str, Any]:
        """The per-request options aiohttp takes for `target`: TLS context, proxy, no redirects."""
        options: dict[str, Any] = {"allow_redirects": False}
        if target.tls:
            options["ssl"] = self._tls
        if target.proxy is not None:
            options["proxy"] = target.proxy
            options["proxy_auth"] = target.proxy_auth
        return options

    def _session_for(self, *, fresh: bool) -> aiohttp.ClientSession:
        if fresh:
            if self._fresh_session is None:
                self._fresh_session = self._new_session(fresh=True)
            return self._fresh_session
        if self._session is None:
            self._session = self._new_session(fresh=False)
        return self._session


def tls_context() -> ssl.SSLContext:
    """The TLS context of the pool's `https` calls, from the environment as it is now.

    `REQUESTS_CA_BUNDLE` (set and not empty) names the trusted CAs: a PEM file (`cafile`) or a
    folder of hashed certificates (`capath`), instead of the default store, as `requests` reads
    it; otherwise the default store, where OpenSSL honours `SSL_CERT_FILE` / `SSL_CERT_DIR`.

    Raises:
        HttpTransportError: the bundle cannot be read; the message names the variable and the
            path (each call then fails as a `connection_error` saying so).
    """
    import ssl

    bundle = os.environ.get("REQUESTS_CA_BUNDLE")
    if not bundle:
        return ssl.create_default_context()
    try:
        if os.path.isdir(bundle):
            return ssl.create_default_context(capath=bundle)
        return ssl.create_default_context(cafile=bundle)
    except OSError as error:  # missing, unreadable, or not certificates (ssl.SSLError)
        raise HttpTransportError(
            f"REQUESTS_CA_BUNDLE={bundle!r} cannot be read as a CA bundle: {error}"
        ) from None


def _check_header_values(headers: dict[str, str]) -> None:
    """Refuse a header that would split the request (a line break) or rename itself (a colon)."""
    for name, value in headers.items():
        if any(c in name for c in "\r\n:") or "\r" in value or "\n" in value:
            raise HttpTransportError(f"header {name!r} contains a line break or a colon")


async def _read_capped(reply: aiohttp.ClientResponse, max_bytes: int) -> HttpResponse:
    """The response with at most `max_bytes + 1` body bytes; past the cap the rest is dropped.

    A body whose declared `Content-Length` is within the cap and not compressed is read in one
    call (aiohttp never reads past the declared length); any other body is read in chunks and
    cut, the connection then closed so nothing unread is left on it.
    """
    headers = reply.headers  # case-insensitive (aiohttp's CIMultiDictProxy)
    declared = reply.content_length
    if declared is not None and declared <= max_bytes and "content-encoding" not in headers:
        return HttpResponse(reply.status, headers, await reply.read(), False)
    chunks: list[bytes] = []
    size = 0
    stream = reply.content
    while size <= max_bytes:
        chunk = await stream.read(min(max_bytes + 1 - size, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    truncated = size > max_bytes
    if truncated:
        reply.close()  # drop the connection: the rest of the body is never read
    return HttpResponse(reply.status, headers, b"".join(chunks), truncated)


def require_pool(session: object) -> HttpPool:
    """`session` if it is an `HttpPool`; a clear error for anything else (a bare aiohttp session).

    Raises:
        TypeError: naming what was passed and what to pass instead.
    """
    if not isinstance(session, HttpPool):
        raise TypeError(
            f"the provider's session must be trustbench.providers.new_session(...) (an HttpPool), "
            f"not {type(session).__module__}.{type(session).__qualname__}"
        )
    return session
