"""Shared pieces of the Inspect AI interop: the optional-dependency check and message conversion.

Inspect AI is an optional extra (`pip install -e '.[inspect]'`); nothing outside
`trustbench.interop` imports it, and the interop commands import it only when they run.
"""

from __future__ import annotations

import importlib.util
import json
from typing import Any

from trustbench.errors import InputError

INSTALL_HINT = (
    "install the `inspect` extra: pip install -e '.[inspect]' in a clone (README: Installing "
    "without make)"
)
"""What to tell a user who runs an interop command without Inspect AI."""


def require_inspect() -> None:
    """Fail with an actionable message when Inspect AI is not installed.

    Raises:
        InputError: `inspect_ai` cannot be imported.
    """
    if importlib.util.find_spec("inspect_ai") is None:
        raise InputError(f"Inspect AI is not installed; {INSTALL_HINT}")


def chat_messages(messages: list[dict[str, Any]]) -> list[Any]:
    """Provider-neutral `{"role", "content"}` messages as Inspect chat messages."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser}
    converted: list[Any] = []
    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        kind = kinds.get(str(message.get("role")), ChatMessageAssistant)
        converted.append(kind(content=text))
    return converted


def attempt_reply(attempt: dict[str, Any]) -> str | None:
    """The reply text an attempt received, from its raw response (None when there was none).

    The raw response is what the candidate sent: an OpenAI-shaped body (`choices`), an
    Anthropic-shaped body (`content` blocks), an in-process reply (`text`), or anything else,
    which is returned verbatim so a malformed body stays visible.
    """
    raw = attempt.get("raw_response")
    if raw is None:
        return None
    try:
        body = json.loads(raw)
    except (TypeError, ValueError):
        return str(raw)
    if isinstance(body, dict):
        choices = body.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            content = (choices[0].get("message") or {}).get("content")
            return content if isinstance(content, str) else None
        if isinstance(body.get("text"), str) or "text" in body:
            return body.get("text")
        blocks = body.get("content")
        if isinstance(blocks, list):
            return "".join(b.get("text", "") for b in blocks if isinstance(b, dict)) or None
    return str(raw)


def request_messages(request: Any) -> list[Any]:
    """The messages of a recorded request, as Inspect chat messages.

    A chat request's `messages` are converted one for one; any other recorded request (a tool
    call, a boundary check, an adapter call) is shown whole, as JSON, in one user message, so no
    call looks as if nothing was sent.
    """
    if request is None:
        return []
    if isinstance(request, dict) and isinstance(request.get("messages"), list):
        return chat_messages(request["messages"])
    return chat_messages(
        [{"role": "user", "content": json.dumps(request, ensure_ascii=False, sort_keys=True)}]
    )
