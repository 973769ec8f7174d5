"""A candidate with the shapes the tracks call: sync and async methods, models, a callback."""

from __future__ import annotations

from typing import Any

from trustbench.providers._types import ChatReply, ChatRequest


class Boundaryish:
    """Answers from what the harness object it is given says (a callback), as a boundary does."""

    name = "boundaryish"
    enforcement = "enforcing"

    async def authorize(self, request: ChatRequest, platform: Any) -> ChatReply:
        looked_up = platform.lookup(request.messages[0]["content"])
        return ChatReply(text=f"{looked_up}:{request.temperature}", finish_reason="stop")

    def fail(self) -> None:
        raise ValueError("the candidate's own failure")

    def passes_through(self, platform: Any) -> None:
        platform.refuse()


def make(settings: dict[str, Any]) -> Boundaryish:
    assert settings == {"k": [1, 2]}
    return Boundaryish()
