"""What both local participant apps share (`rtb human serve`, `trb collect serve`).

Request guards, the bound socket and the serve loop, kept outside both suites so neither
imports the other:

- every session route is under `/s/<token>`; `token_owner` matches a token in constant time
  and `session_owner` answers an unknown one 403;
- `host_guard`: every request's `Host` must name the address the app's socket serves
  (`localhost` too on a loopback one), so a DNS-rebinding page, whose `Origin` and `Host` both
  name the attacker's domain, is refused;
- `check_origin`: every POST must come from a page of the app (`Origin`, else `Referer`, naming
  this host; `Sec-Fetch-Site: same-origin` only when neither names a page, never over a foreign
  one), so another site open in the participant's browser cannot post for them;
- `posted_form`: a body that cannot be parsed, or holds a file where text belongs, is answered
  400, never 500;
- `listen_socket` binds before the run is opened, so a used port is reported at once;
  `serve_until_stopped` serves on that very socket until Ctrl-C or SIGTERM; a request aiohttp
  cannot even parse is answered 400 by aiohttp and logged in one line, not as a traceback;
- `page_renderer` renders an app's own jinja2 templates, autoescaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import ipaddress
import logging
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self, cast
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError
from jinja2 import Environment, PackageLoader, select_autoescape
from multidict import MultiDictProxy

from trustbench.core import Ledger, RunLock
from trustbench.errors import InputError

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}
"""Headers of every response: no external or scripted content, nothing cached, and the token in
the URL never leaves for another origin (`no-referrer` would make browsers send `Origin: null` on
the app's own form posts)."""


def html(text: str, status: int = 200) -> web.Response:
    """An HTML page with the app's headers."""
    return web.Response(text=text, status=status, content_type="text/html", headers=HEADERS)


TOKENS_KEY: web.AppKey[dict[str, str]] = web.AppKey("tokens", dict)
"""Where the app keeps access token -> participant."""


def new_app(
    tokens: dict[str, str],
    landing: Callable[[web.Request], Awaitable[web.StreamResponse]],
    show: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> web.Application:
    """A guarded app with its tokens, `GET /` (`landing`) and `GET /s/<token>` (`show`).

    Bodies are capped at 64 KiB (a form of text fields) and every request passes `host_guard`.
    """
    app = web.Application(client_max_size=64 * 1024, middlewares=[host_guard])
    app[TOKENS_KEY] = dict(tokens)
    app.router.add_get("/", landing)
    app.router.add_get("/s/{token}", show)
    return app


def token_owner(request: web.Request) -> str | None:
    """Who owns the access token in the URL (every token compared in constant time)."""
    token = request.match_info["token"]
    found = None
    for known, owner in request.app[TOKENS_KEY].items():
        if hmac.compare_digest(known.encode(), token.encode()):
            found = owner
    return found


def session_owner(request: web.Request, unknown_page: Callable[[], str]) -> str:
    """Who owns the access token in the URL, or 403 with `unknown_page()` and no other content."""
    found = token_owner(request)
    if found is None:
        raise web.HTTPForbidden(text=unknown_page(), content_type="text/html", headers=HEADERS)
    return found


def back_to_session(request: web.Request) -> web.HTTPSeeOther:
    """The redirect (to raise) back to the session page after a form is handled."""
    return web.HTTPSeeOther(f"/s/{request.match_info['token']}", headers=HEADERS)


def check_origin(request: web.Request) -> None:
    """403 unless the POST comes from this app's own pages.

    Accepted evidence: an `Origin` (or, lacking one, a `Referer`) naming this scheme and host;
    only when neither names any page (absent, empty, or the opaque `null`) does
    `Sec-Fetch-Site: same-origin` count (set by the browser itself; a page cannot forge it).
    A page named is decisive: `Sec-Fetch-Site` never overrides a foreign `Origin`, since a
    client that is no browser sets both at will and one that claims two origins is refused.
    """
    origin = request.headers.get("Origin")
    source = origin if origin and origin != "null" else request.headers.get("Referer")
    if source:
        parts = urlsplit(source)
        if parts.scheme == request.scheme and parts.netloc == request.host:
            return
    elif request.headers.get("Sec-Fetch-Site") == "same-origin":
        return
    raise web.HTTPForbidden(
        text="cross-origin or origin-less form posts are refused", headers=HEADERS
    )


async def posted_form(request: web.Request) -> MultiDictProxy[str]:
    """The posted form, text fields only; 400 when it cannot be parsed."""
    try:
        data = await request.post()
    except web.HTTPException:
        raise
    except (
        ValueError,
        AssertionError,
        LookupError,
        RuntimeError,
        TypeError,
        HttpProcessingError,
        RequestPayloadError,
    ) as error:
        # aiohttp raises these for a broken body: no boundary, truncated parts, a header line
        # it cannot parse, an unknown charset or transfer encoding (found by fuzzing), and
        # `RequestPayloadError` (a plain Exception) for a body its Content-Encoding does not
        # decode (`gzip` over text).
        raise web.HTTPBadRequest(text=f"malformed form: {error}", headers=HEADERS) from None
    if any(not isinstance(value, str) for value in data.values()):
        raise web.HTTPBadRequest(text="malformed form: only text fields", headers=HEADERS)
    return cast("MultiDictProxy[str]", data)  # every value checked to be text


def served_hosts(request: web.Request) -> set[str]:
    """The `Host` values that name the address this connection reached (DNS-rebinding guard)."""
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    if not sockname:
        return set()
    address, port = str(sockname[0]), int(sockname[1])
    literal = f"[{address}]" if ":" in address else address
    names = {f"{literal}:{port}"}
    if ipaddress.ip_address(address.split("%")[0]).is_loopback:
        names |= {f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"}
    if port == 80:  # a client may leave the default port out
        names |= {name.rsplit(":", 1)[0] for name in names}
    return names


@web.middleware
async def host_guard(request: web.Request, handler: Any) -> web.StreamResponse:
    """403 unless `Host` names the address the app serves.

    A DNS-rebinding page (`evil.example` resolved to 127.0.0.1) reaches the app with
    `Host: evil.example:PORT` and an `Origin` to match, which the origin check alone accepts.
    """
    if request.headers.get("Host", "").lower() not in served_hosts(request):
        raise web.HTTPForbidden(
            text="the Host header does not name the address this app serves", headers=HEADERS
        )
    return await handler(request)


def page_renderer(package: str, title: str) -> Callable[..., str]:
    """`render(template, **values)` over `package`'s `templates` folder (package data).

    Every value is autoescaped; `title` (the app's page title, naming no participant or item)
    and `progress` (None) are filled in unless given. The environment is built on first use.
    """

    @lru_cache(maxsize=1)
    def environment() -> Environment:
        return Environment(
            loader=PackageLoader(package, "templates"),
            autoescape=select_autoescape(["html", "j2"], default=True),
        )

    def render(template: str, **values: Any) -> str:
        values.setdefault("title", title)
        values.setdefault("progress", None)
        return environment().get_template(template).render(**values)

    return render


def format_limit(seconds: float) -> str:
    """`300` -> `5 min`, `90` -> `1 min 30 s`."""
    minutes, rest = divmod(round(seconds), 60)
    if not minutes:
        return f"{rest} s"
    return f"{minutes} min" + (f" {rest} s" if rest else "")


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket listening on `host:port`, bound before the run is opened.

    A port already in use is then reported at once, with the port and what to do, instead of
    after the sessions have been set up; the server is handed this very socket (no race). An
    empty `--host` (say `--host "$HOST"` with HOST unset) is refused: the socket layer would
    take it for every interface and put the participants' links on the network.

    Raises:
        InputError: `host` is empty or not an address of this machine, `port` is not a TCP
            port, or the address cannot be bound (port in use, no permission).
    """
    if not host.strip():
        raise InputError(
            "--host is empty: give the address to listen on, e.g. 127.0.0.1 (this machine "
            "only, the default) or 0.0.0.0 (every interface, reachable from the network)",
            location="--host",
        )
    if not 0 <= port <= 65535:
        raise InputError(f"--port {port} is not a TCP port (0 to 65535; 0 = any free port)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:  # resolved apart: `create_server` reports a name that does not resolve as a bind error
        socket.getaddrinfo(host, port, family, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise InputError(
            f"cannot listen on {host}:{port}: {error.strerror or error}; --host takes an "
            "address or host name of this machine (127.0.0.1: this machine only)",
            location="--host",
        ) from None
    try:
        return socket.create_server((host, port), family=family)
    except OSError as error:
        if error.errno == errno.EADDRNOTAVAIL:  # a well-formed address, not this machine's
            raise InputError(
                f"cannot listen on {host}:{port}: {error.strerror}; {host} is not an address "
                "of this machine (127.0.0.1: this machine only; 0.0.0.0: every interface)",
                location="--host",
            ) from None
        raise InputError(
            f"cannot listen on {host}:{port}: {error.strerror or error}; stop whatever uses "
            f"port {port} or choose another with --port N (--port 0: any free port)",
            location="--port",
        ) from None


@dataclass(kw_only=True)
class ServedFolder:
    """A folder open for serving (use as a context manager), under its `RunLock` throughout.

    The lock is the one `trustbench run` (and `trb collect export`) take, so two writers never
    share one ledger. A subclass opens its ledger, sessions, tokens and app in `_open` and signs
    the ledger off in `_close`; a failure while opening closes whatever was opened.
    """

    tokens: dict[str, str] = field(default_factory=dict)
    """Access token -> participant (fresh for every serve; give each only to its owner)."""
    app: web.Application | None = None
    """The app (set while open)."""
    _lock: RunLock | None = None
    _ledger: Ledger | None = None

    def __enter__(self) -> Self:
        lock = RunLock(self.served_folder)
        lock.__enter__()
        self._lock = lock
        try:
            self._open()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    @property
    def served_folder(self) -> Path:
        """The run or collection folder."""
        raise NotImplementedError

    def links(self, base_url: str) -> dict[str, str]:
        """Participant -> personal session URL (`/s/<token>`), for each one `_serves`."""
        return {
            who: f"{base_url}/s/{token}" for token, who in self.tokens.items() if self._serves(who)
        }

    def _serves(self, participant: str) -> bool:
        """Whether `participant` still gets a session link (withdrawn participants do not)."""
        return True

    def _open(self) -> None:
        raise NotImplementedError

    def _close(self, ledger: Ledger) -> None:
        """Sign the open ledger off (it is closed, and the lock released, right after)."""

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            if self._ledger is not None:
                self._close(self._ledger)
                self._ledger.close()
        finally:
            self._ledger = None
            if self._lock is not None:
                self._lock.__exit__(None, None, None)
                self._lock = None


class Served(Protocol):
    """An open run or folder that serves an app (set while open)."""

    @property
    def app(self) -> web.Application | None:
        """The app to serve."""
        ...

    def links(self, base_url: str) -> dict[str, str]:
        """Participant -> personal session URL."""
        ...


def announce_links(served: Served, what: str, base_url: str, stops: str) -> None:
    """Print where the app serves and one private link per participant (the operator's view)."""
    print(f"serving {what} on {base_url} ({stops})")
    for who, link in sorted(served.links(base_url).items()):
        print(f"  {who}: {link}")
    print("give each participant only their own link (it is their access token)")
    sys.stdout.flush()


class _ClientErrorsInOneLine(logging.Filter):
    """A request aiohttp cannot parse, logged in one line rather than with a traceback.

    aiohttp logs a malformed request line or header (which it answers 400) with a full
    traceback, as if the app had failed: it is the client's error. The entry is kept, as one
    line naming the client and the status.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError | RequestPayloadError):
            # A body that cannot be decoded (`Content-Encoding: gzip` over garbage) surfaces as
            # a payload error once the handler reads it: the client's fault too.
            code = error.code if isinstance(error, HttpProcessingError) else 400
            text = error.message if isinstance(error, HttpProcessingError) else str(error)
            first_line = next(iter(str(text).strip().splitlines()), "")
            record.args = (record.getMessage(), code, first_line)
            record.msg = "%s: answered %s (%s)"
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


SERVER_LOGGER = logging.getLogger("trustbench.local_app")
"""The apps' server log (aiohttp's errors while handling a request)."""
SERVER_LOGGER.addFilter(_ClientErrorsInOneLine())


def app_runner(app: web.Application) -> web.AppRunner:
    """The runner serving a local app: no access log, a client's malformed request in one line."""
    return web.AppRunner(app, access_log=None, logger=SERVER_LOGGER)


def serve_until_stopped(
    listening: socket.socket,
    host: str,
    opened: AbstractContextManager[Served],
    *,
    what: str,
    stops: str,
) -> None:
    """Open `opened`, serve its app on `listening` until Ctrl-C or SIGTERM, then close it.

    Once the app is up it prints `serving WHAT on URL (STOPS)` and one private link per
    participant. SIGTERM (a service manager, `kill`) stops exactly like Ctrl-C: `opened` closes
    normally (pausing open clocks, signing its ledger off).
    """

    async def main() -> None:
        with listening, opened as served:
            assert served.app is not None
            stop = asyncio.Event()
            # Both signals stop the loop itself, set before the links are shown: Python turns
            # Ctrl-C into KeyboardInterrupt only where SIGINT was not ignored when it started
            # (a shell's background job inherits it ignored), and such a server would outlive
            # `kill -INT`.
            for stopping in (signal.SIGINT, signal.SIGTERM):
                asyncio.get_running_loop().add_signal_handler(stopping, stop.set)
            runner = app_runner(served.app)
            await runner.setup()
            await web.SockSite(runner, listening).start()
            announce_links(served, what, f"http://{host}:{listening.getsockname()[1]}", stops)
            try:
                await stop.wait()
            finally:
                await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
