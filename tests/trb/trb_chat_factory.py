"""`MODULE:FACTORY` for the chat-through-the-track test, importing trustbench only.

A submitted adapter runs in a sandboxed worker that can import its own module folder and
trustbench, not the test suite's helpers, so the factory lives apart from the test module.
"""

from __future__ import annotations

import os

from trustbench.trb.proxy._chat import ChatProxyAdapter


def chat_adapter() -> ChatProxyAdapter:
    """A chat proxy on the test server named in `TRB_TEST_CHAT_URL`."""
    return ChatProxyAdapter(os.environ["TRB_TEST_CHAT_URL"], "scripted", name="chat")


def honest_chat() -> ChatProxyAdapter:
    """A chat proxy that reads the encoding its prompt asks for (`TRB_ENCODING_CHAT_URL`)."""
    return ChatProxyAdapter(os.environ["TRB_ENCODING_CHAT_URL"], "honest", name="honest")


def cheat_chat() -> ChatProxyAdapter:
    """A chat proxy that always answers in the training encoding."""
    return ChatProxyAdapter(os.environ["TRB_ENCODING_CHAT_URL"], "cheat", name="cheat")
