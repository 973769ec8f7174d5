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
import os
import time
from datetime import UTC, datetime
from typing import Any, Self

from trustbench._canonical import canonical_json
from trustbench.providers._pool import HttpPool, HttpTransportError, require_pool
from trustbench.providers._types import (
    DEFAULT_MAX_RESPONSE_BYTES,
    AttemptResult,
    ChatReply,
    ChatRequest,
    PriceSpec,
    attempt_cost,
)

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


# ------------------------------------------------------------------------------------------------
# What every HTTP chat client shares: settings, the one-call `send` and the usage bookkeeping.
#
# The OpenAI and Anthropic clients differ only in their endpoint, headers, body, reply parser and
# usage field names; the call itself (record the body, POST once, parse or mark malformed, count
# tokens, price them) is written once here so the two cannot drift apart.


class HttpChatProvider:
    """One POST per `send`, no hidden retries; subclasses say how to build and read the JSON."""

    usage_fields: tuple[str, str] = ("prompt_tokens", "completion_tokens")
    """The `usage` keys holding the input and output token counts."""

    path: str = ""
    """Appended to `base_url` to give the endpoint."""

    request_fields: frozenset[str] = frozenset()
    """The API's request fields: what a candidate's `settings` keys are checked against."""

    def __init__(
        self,
        session: HttpPool,
        *,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        settings: dict[str, Any] | None = None,
        price: PriceSpec | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.session = require_pool(session)
        self.session.load_client()  # aiohttp now, not in the first timed request
        self.requested_model: str | None = model
        self.endpoint: str | None = f"{base_url.rstrip('/')}{self.path}"
        self.settings = dict(settings or {})
        self.price = price
        self.max_response_bytes = max_response_bytes
        """Largest response body read; a longer one is stored truncated, never parsed."""
        # The key is read once, kept only in the headers, never in a body or record.
        self._headers = self.headers_for(os.environ[api_key_env] if api_key_env else None)

    def headers_for(self, api_key: str | None) -> dict[str, str]:
        """The headers sent with every request (`api_key` None: no key was configured)."""
        raise NotImplementedError

    def for_trial(self) -> Self:
        """Stateless over HTTP: every request carries its whole conversation."""
        return self

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        """Translate a request to this API's JSON body."""
        raise NotImplementedError

    def parse(self, document: dict[str, Any]) -> ChatReply:
        """Parse a response document; a wrong shape raises (and becomes malformed)."""
        raise NotImplementedError

    def refusal(self, request: ChatRequest) -> str | None:
        """Why this request cannot be sent to this API (it then fails as client_error), or None."""
        return None

    def read_usage(self, document: Any, result: AttemptResult) -> None:
        """Copy the token counts (and anything else observed) from the response into `result`."""
        usage = document.get("usage") if isinstance(document, dict) else None
        if isinstance(usage, dict):
            tokens_in, tokens_out = (usage.get(field) for field in self.usage_fields)
            result.prompt_tokens = tokens_in if isinstance(tokens_in, int) else None
            result.completion_tokens = tokens_out if isinstance(tokens_out, int) else None

    async def send(self, request: ChatRequest, timeout_s: float) -> AttemptResult:
        """Make one call and return everything observed about it."""
        body = self.build_body(request)
        result = AttemptResult(
            request_body=body,
            requested_model=self.requested_model,
            request_json=canonical_json(body),
            endpoint=self.endpoint,
        )
        why = self.refusal(request)
        if why is not None:
            result.error_class = "client_error"
            result.error_message = why
            return result
        assert self.endpoint is not None
        document = await post_json(
            self.session,
            self.endpoint,
            self._headers,
            body,
            timeout_s,
            result,
            max_bytes=self.max_response_bytes,
        )
        if document is None:
            return result
        reply_or_malformed(result, self.parse, document)
        self.read_usage(document, result)
        result.cost_usd = attempt_cost(self.price, result.prompt_tokens, result.completion_tokens)
        return result
