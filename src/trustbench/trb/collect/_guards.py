"""Request guards of the collection app: token, Host, Origin and form parsing.

The same rules as the RTB human review app (`trustbench.rtb.human._app`), kept here because a
TRB module does not import the RTB suite:

- every session route is under `/s/<token>`; an unknown token gets 403 (constant-time match);
- every request's `Host` must name the address the app's socket serves (`localhost` too on a
  loopback one), so a DNS-rebinding page is refused;
- every POST must come from a page of this app (`Origin`, else `Referer`, naming this host, or
  `Sec-Fetch-Site: same-origin`), so another site cannot answer or withdraw for a participant;
- a body that cannot be parsed, or holds a file where text belongs, is answered 400, never 500.
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}
"""Headers of every response: no external or scripted content, nothing cached."""


def token_owner(tokens: dict[str, str], token: str) -> str | None:
    """The participant whose access token this is (every token compared in constant time)."""
    found = None
    for known, owner in tokens.items():
        if hmac.compare_digest(known.encode(), token.encode()):
            found = owner
    return found


def check_origin(request: web.Request) -> None:
    """403 unless the POST comes from this app's own pages."""
    if request.headers.get("Sec-Fetch-Site") == "same-origin":
        return
    source = request.headers.get("Origin") or request.headers.get("Referer")
    parts = urlsplit(source) if source and source != "null" else None
    if parts is None or parts.scheme != request.scheme or parts.netloc != request.host:
        raise web.HTTPForbidden(
            text="cross-origin or origin-less form posts are refused", headers=HEADERS
        )


async def text_form(request: web.Request) -> dict[str, str]:
    """The posted form as text fields; 400 when it cannot be parsed."""
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
    ) as error:
        # what aiohttp raises for a broken body: no boundary, truncated parts, a bad charset
        raise web.HTTPBadRequest(text=f"malformed form: {error}", headers=HEADERS) from None
    if any(not isinstance(value, str) for value in data.values()):
        raise web.HTTPBadRequest(text="malformed form: only text fields", headers=HEADERS)
    return {key: str(value) for key, value in data.items()}


def served_hosts(request: web.Request) -> set[str]:
    """The `Host` values that name the address this connection reached."""
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    if not sockname:
        return set()
    address, port = str(sockname[0]), int(sockname[1])
    literal = f"[{address}]" if ":" in address else address
    names = {f"{literal}:{port}"}
    if ipaddress.ip_address(address.split("%")[0]).is_loopback:
        names |= {f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"}
    if port == 80:
        names |= {name.rsplit(":", 1)[0] for name in names}
    return names


@web.middleware
async def host_guard(request: web.Request, handler: Any) -> web.StreamResponse:
    """403 unless `Host` names the address the app serves (DNS-rebinding guard)."""
    if request.headers.get("Host", "").lower() not in served_hosts(request):
        raise web.HTTPForbidden(
            text="the Host header does not name the address this app serves", headers=HEADERS
        )
    return await handler(request)
