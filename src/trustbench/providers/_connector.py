"""The aiohttp side of the HTTP pool: its sessions and the endpoint look-up, loaded on first use.

`_pool.HttpPool` is made by every run, also one with nothing left to send (a finished folder,
in-process candidates only), and aiohttp with its TLS set-up is about a fifth of a second of
import: that is paid here, when the pool makes its first session or resolves its first URL, not
when the pool is made (issue 35).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

__all__ = ["URL", "client_session", "env_proxy"]


class _CheckedConnector(aiohttp.TCPConnector):
    """A connector that does not hand out an idle connection whose FIN is already in the buffer.

    (Polling the socket instead, as httpcore does, cost about 0.4 ms of CPU per request here:
    the syscall's release of the GIL beside the ledger's writer thread; one loop turn costs
    nothing measurable and found every closed connection in the tests.)

    `_get` is aiohttp's "next reusable connection" step (private; its argument list changed
    between releases, hence `*args, **kwargs`); `tests/providers/test_http_dead_connections.py`
    fails if a release stops calling it.
    """

    async def _get(self, key: Any, *args: Any, **kwargs: Any) -> Any:
        while True:
            connection = await super()._get(key, *args, **kwargs)
            if connection is None:
                return None
            await asyncio.sleep(0)  # let the loop read a FIN already in the socket buffer
            if connection.transport is not None and not connection.transport.is_closing():
                return connection
            connection.close()  # released as closed; try the next idle one


def client_session(
    limit: int, *, fresh: bool, max_header_bytes: int, headers: dict[str, str]
) -> aiohttp.ClientSession:
    """A session as the pool uses it: no cookies, no environment, no timeout of its own.

    `fresh`: every connection closed after its response (for a resend after a stale one).
    """
    connector_type = aiohttp.TCPConnector if fresh else _CheckedConnector
    connector = connector_type(limit=limit, force_close=fresh)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None),  # ours: `asyncio.timeout` in post_json
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,  # the environment's proxies are resolved once, in `HttpPool._target`
        max_line_size=max_header_bytes,
        max_field_size=max_header_bytes,
        headers=headers,
    )


def env_proxy(url: URL) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The proxy (and its credentials) the environment names for `url`; (None, None) if none."""
    try:
        return get_env_proxy_for_url(url)
    except LookupError:  # no proxy for this URL (none set, or NO_PROXY names it)
        return None, None
