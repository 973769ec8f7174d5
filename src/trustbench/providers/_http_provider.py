"""What every HTTP chat client shares: settings, the one-call `send` and the usage bookkeeping.

The OpenAI and Anthropic clients differ only in their endpoint, headers, body, reply parser and
usage field names; the call itself (record the body, POST once, parse or mark malformed, count
tokens, price them) is written once here so the two cannot drift apart.
"""

from __future__ import annotations

import os
from typing import Any, Self

from trustbench._canonical import canonical_json
from trustbench.providers._http import post_json, reply_or_malformed
from trustbench.providers._pool import HttpPool, require_pool
from trustbench.providers._pricing import PriceSpec, attempt_cost
from trustbench.providers._types import (
    DEFAULT_MAX_RESPONSE_BYTES,
    AttemptResult,
    ChatReply,
    ChatRequest,
)


class HttpChatProvider:
    """One POST per `send`, no hidden retries; subclasses say how to build and read the JSON."""

    usage_fields: tuple[str, str] = ("prompt_tokens", "completion_tokens")
    """The `usage` keys holding the input and output token counts."""

    path: str = ""
    """Appended to `base_url` to give the endpoint."""

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
