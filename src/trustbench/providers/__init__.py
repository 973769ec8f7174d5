"""Chat-model clients (OpenAI-compatible, Anthropic, in-process) that record usage, latency, cost.

Every client makes exactly one call per `send` and classifies failures; the runner owns retries,
so each retry is a visible attempt in the ledger. This package imports nothing from
`trustbench.core`: core builds providers from specs (`trustbench.core._context`), not the reverse.
"""

from __future__ import annotations

from trustbench.providers._anthropic import AnthropicMessagesProvider
from trustbench.providers._http import new_session
from trustbench.providers._inprocess import InProcessProvider
from trustbench.providers._openai import OpenAIChatProvider
from trustbench.providers._pool import HttpPool, HttpTransportError
from trustbench.providers._types import (
    ERROR_CLASSES,
    AttemptResult,
    ChatProvider,
    ChatReply,
    ChatRequest,
    PriceSpec,
    TokenLogprob,
    ToolCall,
    attempt_cost,
)

__all__ = [
    "ERROR_CLASSES",
    "AnthropicMessagesProvider",
    "AttemptResult",
    "ChatProvider",
    "ChatReply",
    "ChatRequest",
    "HttpPool",
    "HttpTransportError",
    "InProcessProvider",
    "OpenAIChatProvider",
    "PriceSpec",
    "TokenLogprob",
    "ToolCall",
    "attempt_cost",
    "new_session",
]
