"""Build a candidate's provider from its spec entry.

Core depends on providers, never the reverse: the provider clients know nothing of specs.
"""

from __future__ import annotations

import os

from trustbench._imports import import_object
from trustbench.core._spec import CandidateSpec
from trustbench.errors import InputError
from trustbench.providers._anthropic import AnthropicMessagesProvider
from trustbench.providers._inprocess import InProcessProvider
from trustbench.providers._openai import OpenAIChatProvider
from trustbench.providers._pool import HttpPool
from trustbench.providers._types import DEFAULT_MAX_RESPONSE_BYTES, ChatProvider


def provider_classes() -> dict[str, type]:
    """API provider class per candidate kind."""
    return {"openai_chat": OpenAIChatProvider, "anthropic_messages": AnthropicMessagesProvider}


def provider_adaptations(candidate: CandidateSpec) -> tuple[str, ...]:
    """How this candidate's provider adapts requests (frozen into the manifest)."""
    cls = provider_classes().get(candidate.kind)
    return cls.adaptations if cls else InProcessProvider.adaptations


def check_credentials(candidates: list[CandidateSpec]) -> None:
    """Fail before anything runs when a named API key variable is unset or not one line.

    A key holding a line break (a file read with its trailing newline) would make every request
    a refused header: refused here, once, instead of as a connection error in every trial.

    Raises:
        InputError: naming the candidate and the variable.
    """
    for candidate in candidates:
        if not candidate.api_key_env:
            continue
        where = f"candidate {candidate.name} api_key_env"
        value = os.environ.get(candidate.api_key_env)
        if value is None:
            raise InputError(
                f"environment variable {candidate.api_key_env} is not set", location=where
            )
        if "\r" in value or "\n" in value:
            raise InputError(
                f"environment variable {candidate.api_key_env} holds a line break "
                "(an API key is one line; strip the trailing newline)",
                location=where,
            )


def build_provider(
    candidate: CandidateSpec,
    session: HttpPool,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
) -> ChatProvider | None:
    """Create the provider for `candidate`, or None for an in-process one without an entry.

    `max_response_bytes` is the spec's cap on one response body (API candidates).

    Raises:
        InputError: when `api_key_env` names an unset variable or `entry` cannot be imported.
    """
    if candidate.kind == "inprocess":
        if candidate.entry is None:
            return None
        factory = import_object(candidate.entry, what=f"candidate {candidate.name} entry")
        return InProcessProvider(factory, name=candidate.name, settings=candidate.settings)
    check_credentials([candidate])
    assert candidate.base_url is not None and candidate.model is not None
    return provider_classes()[candidate.kind](
        session,
        base_url=candidate.base_url,
        model=candidate.model,
        api_key_env=candidate.api_key_env,
        settings=candidate.settings,
        price=candidate.price,
        max_response_bytes=max_response_bytes,
    )
