"""`MODULE:FACTORY` for the chat-through-the-track tests, importing trustbench only.

A submitted adapter runs in a sandboxed worker that can import its own module folder and
trustbench, not the test suite's helpers, so the factory lives apart from the test module. Its
worker inherits none of the harness's environment variables (docs/sandbox.md), so the chat
server's URL lies beside the module, in `chat_url.txt`, as a submitted adapter carries its own
configuration: `tests.support.trb_spec.chat_factory_folder` copies both into a test's folder.
"""

from __future__ import annotations

from pathlib import Path

from trustbench.trb.proxy._chat import ChatProxyAdapter


def _chat_url() -> str:
    return Path(__file__).with_name("chat_url.txt").read_text(encoding="utf-8").strip()


def chat_adapter() -> ChatProxyAdapter:
    """A chat proxy on the test server that answers as scripted."""
    return ChatProxyAdapter(_chat_url(), "scripted", name="chat")


def honest_chat() -> ChatProxyAdapter:
    """A chat proxy that reads the encoding its prompt asks for."""
    return ChatProxyAdapter(_chat_url(), "honest", name="honest")


def cheat_chat() -> ChatProxyAdapter:
    """A chat proxy that always answers in the training encoding."""
    return ChatProxyAdapter(_chat_url(), "cheat", name="cheat")
