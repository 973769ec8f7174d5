"""Provider-neutral request, reply and attempt types, and the `ChatProvider` interface.

A provider makes exactly one call per `send` and never retries: the runner owns retries so each
one is visible in the ledger as its own attempt. `send` never raises for a service failure; it
classifies it (`error_class`) and keeps whatever raw text came back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from pydantic import BaseModel, Field, StrictFloat

from trustbench._docstrings import documented

RetryableErrorClass = Literal[
    "rate_limited",
    "server_error",
    "connection_error",
    "timeout",
    "malformed_response",
    "client_error",
]
"""The error classes a spec's `retry_on` may name (the first of `ERROR_CLASSES`)."""

ERROR_CLASSES: tuple[str, ...] = (
    *get_args(RetryableErrorClass),
    "candidate_error",
    "response_too_large",
    "trial_timeout",
    "cancelled",
)
"""Every error class an attempt can carry. `candidate_error`: an in-process candidate raised;
`response_too_large`: the body exceeded the declared `max_response_bytes` (stored truncated, the
reply unusable); `trial_timeout`: the trial's time limit cancelled the call mid-flight;
`cancelled`: the run cancelled the call mid-flight for another reason (a failed preflight, an
interrupt), never a trial timeout."""

DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
"""Default cap on one response body (4 MiB): far above any chat reply, far below a memory
exhaustion (twelve 20 MiB replies once made a 506 MB ledger)."""


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat call as a track asks for it; providers translate it to their wire format."""

    messages: list[dict[str, Any]]
    """OpenAI-style messages: `{"role": "system"|"user"|"assistant"|"tool", "content": ...}`."""
    response_format: Literal["text", "json_object"] | dict[str, Any] = "text"
    """`json_object` asks for a JSON reply where the API supports it (OpenAI-compatible); a
    dict is sent as the body's `response_format` as it is (e.g. `{"type": "json_schema", ...}`
    for structured output)."""
    logprobs: bool = False
    """Return per-token log-probabilities (OpenAI-compatible only)."""
    top_logprobs: int | None = None
    """How many alternatives per token to return with `logprobs`."""
    tools: list[dict[str, Any]] | None = None
    """OpenAI-style function tools; converted for Anthropic."""
    tool_choice: Any = None
    """OpenAI-style tool choice, passed through where supported."""
    max_tokens: int | None = None
    """Completion token limit; overrides the candidate's `settings.max_tokens`."""
    temperature: float | None = None
    """Sampling temperature; overrides the candidate's `settings.temperature`."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model asked for."""

    id: str
    """Provider-assigned call id."""
    name: str
    """Function name."""
    arguments: str
    """Arguments as the raw JSON text the model produced (not parsed: it may be invalid)."""


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token with its log-probability and the top alternatives."""

    token: str
    """The token text."""
    logprob: float
    """Natural-log probability of the token."""
    top: list[tuple[str, float]] = field(default_factory=list)
    """Top alternatives `(token, logprob)`, most likely first."""


@dataclass(frozen=True, slots=True)
class ChatReply:
    """A parsed successful reply."""

    text: str | None
    """Concatenated text content (None when the model only called tools)."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    """Tool calls, in order."""
    finish_reason: str | None = None
    """Why generation stopped, as the provider reports it."""
    logprobs: list[TokenLogprob] | None = None
    """Per-token log-probabilities when requested and returned."""
    reported_model: str | None = None
    """Model id the service says answered (may differ from the requested one)."""
    refusal: str | None = None
    """A refusal message the API returned instead of content (OpenAI `message.refusal`)."""
    reasoning: str | None = None
    """Reasoning the service returned apart from the content (OpenAI-compatible servers'
    `message.reasoning_content` or `message.reasoning`, Anthropic `thinking` blocks): recorded
    with the trial, never part of `text`, so never graded as the answer."""


@dataclass(slots=True)
class AttemptResult:
    """Everything observed about one call, success or failure; becomes one ledger attempt."""

    request_body: dict[str, Any]
    """The exact JSON body sent (no credentials: those travel in headers only)."""
    requested_model: str | None
    """Model id requested."""
    request_json: bytes | None
    """`request_body` as canonical JSON, encoded once and reused for the digest and the record."""
    endpoint: str | None
    """URL called (None for in-process candidates)."""
    raw_response: str | None = None
    """Response body exactly as received (decoded UTF-8, undecodable bytes replaced)."""
    http_status: int | None = None
    """HTTP status, None when no response arrived or for in-process calls."""
    error_class: str | None = None
    """None on success, else one of `ERROR_CLASSES`."""
    error_message: str | None = None
    """Detail of the failure."""
    latency_s: float = 0.0
    """Seconds from sending to having the whole body (or failing)."""
    prompt_tokens: int | None = None
    """Input tokens the service reported (None when not reported)."""
    completion_tokens: int | None = None
    """Output tokens the service reported (None when not reported)."""
    cost_usd: float | None = None
    """Cost from the spec's price table; None when prices or token counts are unknown."""
    reported_model: str | None = None
    """Model id the service reported."""
    retry_after_s: float | None = None
    """Retry-After the service asked for (seconds), if any."""
    reply: ChatReply | None = None
    """The parsed reply on success."""


@runtime_checkable
class ChatProvider(Protocol):
    """One candidate's chat client. Implementations: OpenAI-compatible, Anthropic, in-process."""

    requested_model: str | None
    """Model id sent with every request."""
    endpoint: str | None
    """URL (rate-limit key); None for in-process candidates."""

    def for_trial(self) -> ChatProvider:
        """Return a provider with fresh per-trial state (HTTP clients are stateless: self)."""
        ...

    async def send(self, request: ChatRequest, timeout_s: float) -> AttemptResult:
        """Make exactly one call; classify failures instead of raising them."""
        ...


# ------------------------------------------------------------------------------------------------
# Cost of one attempt from the spec's per-candidate price table.


class PriceSpec(BaseModel):
    """Token prices used to compute each attempt's cost; absent prices give a null cost, not 0."""

    model_config = documented(extra="forbid", frozen=True)

    input_per_mtok: StrictFloat = Field(ge=0)
    """US dollars per one million prompt (input) tokens."""
    output_per_mtok: StrictFloat = Field(ge=0)
    """US dollars per one million completion (output) tokens."""


def attempt_cost(
    price: PriceSpec | None, prompt_tokens: int | None, completion_tokens: int | None
) -> float | None:
    """Return the attempt's cost in US dollars, or None when it cannot be known.

    cost = prompt_tokens * input_per_mtok / 1e6 + completion_tokens * output_per_mtok / 1e6.
    An unknown price or an unreported token count gives None, never 0: a missing figure must not
    read as a free call.
    """
    if price is None or prompt_tokens is None or completion_tokens is None:
        return None
    return (prompt_tokens * price.input_per_mtok + completion_tokens * price.output_per_mtok) / 1e6
