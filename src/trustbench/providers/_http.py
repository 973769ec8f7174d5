"""One HTTP POST with failure classification, shared by the API providers.

No retries here (the runner retries, recording each attempt). Timeouts are ours
(`asyncio.timeout` around connecting, sending *and* reading the body), so a server that stalls
mid-body is a `timeout`, not a hang. The pool (`_pool.HttpPool`, on aiohttp) keeps no cookies and
follows no redirects, so no state can leak from one trial to the next through the shared
connection pool; it sends through the environment's proxies (`HTTP_PROXY`, `HTTPS_PROXY`,
`NO_PROXY`).
"""

from __future__ import annotations

import email.utils
import json
import time
from datetime import UTC, datetime
from typing import Any

from trustbench._canonical import canonical_json
from trustbench.providers._pool import HttpPool, HttpTransportError
from trustbench.providers._types import DEFAULT_MAX_RESPONSE_BYTES, AttemptResult, ChatReply

_MAX_ERROR_TEXT = 500


def new_session(concurrency: int) -> HttpPool:
    """Create the one shared connection pool of a run: keep-alive, no cookies, our timeouts.

    The aiohttp session inside is made on the first request, in the event loop that sends it.

    Args:
        concurrency: Trials in flight; the connection pool is sized to match.
    """
    return HttpPool(concurrency)


def parse_retry_after(value: str | None) -> float | None:
    """Parse a Retry-After header: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)


def classify_status(status: int) -> str | None:
    """Map an HTTP status to an error class (None for 2xx).

    A 3xx is a `client_error`: redirects are not followed, so the frozen endpoint is the only
    one ever called.
    """
    if 200 <= status < 300:
        return None
    if status == 429:
        return "rate_limited"
    if status == 408:
        return "timeout"
    if status >= 500:
        return "server_error"
    return "client_error"


async def post_json(
    session: HttpPool,
    url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    timeout_s: float,
    result: AttemptResult,
    max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
) -> Any:
    """POST `body` as canonical JSON and fill `result` with status, raw text and latency.

    At most `max_bytes + 1` bytes of the body are read: a longer body is stored cut to
    `max_bytes`, with error class `response_too_large` (the truncation flag), and is never parsed
    into a reply, so an oversized answer can neither exhaust memory nor count as a decision.

    Args:
        session: The run's shared connection pool.
        url: Full URL.
        headers: Request headers (credentials live only here, never in `body` or `result`).
        body: JSON body.
        timeout_s: Limit for sending and reading the whole response.
        result: The attempt being recorded; filled in place.
        max_bytes: Largest body accepted (the spec's `max_response_bytes`).

    Returns:
        The decoded JSON document on a 2xx with a JSON body, else None (with `result.error_class`
        set: a malformed 2xx body is `malformed_response`, its raw text kept).
    """
    import asyncio

    data = result.request_json if result.request_json is not None else canonical_json(body)
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            response = await session.post(
                url, {**headers, "Content-Type": "application/json"}, data, max_bytes
            )
    except TimeoutError:
        result.latency_s = time.perf_counter() - started
        result.error_class = "timeout"
        result.error_message = f"no complete response within {timeout_s} s"
        return None
    except (HttpTransportError, OSError) as error:
        result.latency_s = time.perf_counter() - started
        result.error_class = "connection_error"
        result.error_message = f"{type(error).__name__}: {error}"[:_MAX_ERROR_TEXT]
        return None
    result.latency_s = time.perf_counter() - started
    result.http_status = response.status
    result.retry_after_s = parse_retry_after(response.headers.get("retry-after"))
    truncated = response.truncated
    text = response.body[:max_bytes].decode("utf-8", errors="replace")
    result.raw_response = text
    error_class = classify_status(result.http_status)
    if error_class is not None:  # an error status keeps its class (retries still apply)
        result.error_class = error_class
        result.error_message = f"HTTP {result.http_status}: {text[:_MAX_ERROR_TEXT]}"
        if truncated:
            result.error_message += f" (body truncated at max_response_bytes = {max_bytes})"
        return None
    if truncated:
        result.error_class = "response_too_large"
        result.error_message = (
            f"HTTP {result.http_status}: response body exceeds max_response_bytes = {max_bytes}; "
            "stored truncated (truncated: true), not parsed"
        )
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:  # RecursionError: absurdly nested JSON
        result.error_class = "malformed_response"
        result.error_message = f"response body is not JSON: {error}"
        return None


def malformed(result: AttemptResult, why: str) -> None:
    """Mark a 2xx JSON reply whose shape is wrong as `malformed_response` (never a reply)."""
    result.error_class = "malformed_response"
    result.error_message = why
    result.reply = None


def reply_or_malformed(result: AttemptResult, build: Any, document: Any) -> None:
    """Parse `document` with `build`, recording any shape error as `malformed_response`."""
    try:
        reply: ChatReply = build(document)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
        malformed(result, f"unexpected response shape: {type(error).__name__}: {error}")
        return
    result.reply = reply
    result.reported_model = reply.reported_model
