"""Chat-model clients (OpenAI-compatible, Anthropic, in-process) that record usage, latency, cost.

Every client makes exactly one call per `send` and classifies failures; the runner owns retries,
so each retry is a visible attempt in the ledger.
"""

from trustbench.providers._anthropic import AnthropicMessagesProvider
from trustbench.providers._factory import build_provider, check_credentials, provider_adaptations
from trustbench.providers._http import new_session
from trustbench.providers._inprocess import InProcessProvider
from trustbench.providers._openai import OpenAIChatProvider
from trustbench.providers._pricing import attempt_cost
from trustbench.providers._types import (
    ERROR_CLASSES,
    AttemptResult,
    ChatProvider,
    ChatReply,
    ChatRequest,
    TokenLogprob,
    ToolCall,
)

__all__ = [
    "ERROR_CLASSES",
    "AnthropicMessagesProvider",
    "AttemptResult",
    "ChatProvider",
    "ChatReply",
    "ChatRequest",
    "InProcessProvider",
    "OpenAIChatProvider",
    "TokenLogprob",
    "ToolCall",
    "attempt_cost",
    "build_provider",
    "check_credentials",
    "new_session",
    "provider_adaptations",
]
