"""A scriptable local OpenAI-compatible (and Anthropic-shaped) chat server for tests.

Runs on 127.0.0.1 on a free port in a background thread, so synchronous tests, async tests and
subprocesses (a `trustbench run` under test) can all call it. Behaviour is scriptable per request:

    with OpenAIServer() as server:
        server.on("case-7", rate_limited(retry_after="0.05"), server_error(), reply("permit"))
        server.on("case-9", drop_connection())        # then the default reply
        ... base_url=server.base_url ...              # "http://127.0.0.1:PORT/v1"

`on(marker, *behaviours)`: requests whose last user message contains `marker` get the behaviours
in order, then the default. `script(fn)`: `fn(body, n) -> Behaviour | None` decides first. The
default reply echoes the last user message (`echo: <text>`). Every request is kept in
`server.requests` (path, headers, JSON body) for assertions.

Endpoints: `POST /v1/chat/completions` (OpenAI shape, logprobs when asked, tool calls) and
`POST /v1/messages` (Anthropic shape). Use the `openai_server` pytest fixture, importable with
`from tests.support.openai_server import openai_server`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from tests.support.anthropic_strict import anthropic_shape_error


async def read_request_head(reader: asyncio.StreamReader) -> tuple[str, dict[str, str]]:
    """An HTTP/1.1 request's line and its headers (names lower-cased) from `reader`."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return lines[0], headers


@dataclass(frozen=True)
class Behaviour:
    """What the server does with one request."""

    kind: str = "reply"
    """`reply`, `status`, `drop`, `malformed` or `stall`."""
    text: str | None = None
    """Reply text (None with `reply`: echo the last user message)."""
    tool_calls: list[dict[str, Any]] | None = None
    """Tool calls to return: `[{"name": ..., "arguments": {...}}]`."""
    status: int = 200
    """HTTP status for `status` behaviours."""
    retry_after: str | None = None
    """Retry-After header value."""
    latency_s: float = 0.0
    """Delay before answering."""
    model: str | None = None
    """Reported model id (default: the requested one)."""
    body: str | None = None
    """Raw body for `malformed` / `status`."""


def reply(
    text: str | None = None, *, latency_s: float = 0.0, model: str | None = None
) -> Behaviour:
    """A normal reply (echo of the last user message when `text` is None)."""
    return Behaviour("reply", text=text, latency_s=latency_s, model=model)


def json_reply(value: Any, *, latency_s: float = 0.0) -> Behaviour:
    """A reply whose content is `value` as JSON text."""
    return Behaviour("reply", text=json.dumps(value), latency_s=latency_s)


def tool_call(name: str, arguments: dict[str, Any]) -> Behaviour:
    """A reply that calls one tool."""
    return Behaviour("reply", tool_calls=[{"name": name, "arguments": arguments}])


def rate_limited(retry_after: str | None = "0.01") -> Behaviour:
    """HTTP 429 with a Retry-After header."""
    return Behaviour("status", status=429, retry_after=retry_after, body='{"error":"rate limited"}')


def server_error(status: int = 500) -> Behaviour:
    """HTTP 5xx."""
    return Behaviour("status", status=status, body='{"error":"internal"}')


def client_error(status: int = 400) -> Behaviour:
    """HTTP 4xx (not retryable)."""
    return Behaviour("status", status=status, body='{"error":"bad request"}')


def drop_connection() -> Behaviour:
    """Read the request, then close the connection without answering."""
    return Behaviour("drop")


def malformed_json(body: str = '{"choices": [{"message": {"content": "trunc') -> Behaviour:
    """HTTP 200 whose body is not valid JSON."""
    return Behaviour("malformed", body=body)


def raw_body(body: str) -> Behaviour:
    """HTTP 200 with exactly this body (for hand-written response shapes)."""
    return Behaviour("malformed", body=body)


def stall(seconds: float) -> Behaviour:
    """Wait `seconds` before answering (past the client's timeout)."""
    return Behaviour("stall", latency_s=seconds)


def _last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


PREFLIGHT_ASK = "Reply with the single word: ready"
"""The text of trustbench's preflight probe (`trustbench run` sends it before the first trial)."""


def probe_reply(body: Any) -> Behaviour | None:
    """What a working server answers the preflight probe; None when `body` is not the probe.

    Scripts that parse every request as a review input call this first, so the run's
    default preflight passes as it would on a real server (and is still recorded).
    """
    if isinstance(body, dict) and _last_user_text(body) == PREFLIGHT_ASK:
        return reply("ready")
    return None


def _words(text: str) -> list[str]:
    return text.split() or [""]


@dataclass
class RecordedRequest:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class OpenAIServer:
    """The test server. Use as a context manager (or `start()` / `stop()`)."""

    latency_s: float = 0.0
    """Delay added to every default reply."""
    strict_anthropic: bool = False
    """Answer 400 to a `/messages` request that breaks the Anthropic API's shape rules."""
    one_at_a_time: bool = False
    """Serve requests one at a time, in arrival order, as a single-slot local server does
    (llama.cpp with one slot, `transformers serve`); a request whose client closed its
    connection while it waited or was being answered is dropped, as such servers abort it."""
    dropped: int = 0
    """Requests dropped because their client had closed the connection (`one_at_a_time`)."""
    requests: list[RecordedRequest] = field(default_factory=list)
    _serving: asyncio.Lock | None = None
    _queues: dict[str, deque[Behaviour]] = field(default_factory=dict)
    _script: Callable[[Any, int], Behaviour | None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.base_events.Server | None = None
    port: int = 0

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL (`.../v1`)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """Base URL without `/v1` (what the Anthropic client takes)."""
        return f"http://127.0.0.1:{self.port}"

    def on(self, marker: str, *behaviours: Behaviour) -> None:
        """Queue behaviours for requests whose last user message contains `marker`."""
        with self._lock:
            self._queues.setdefault(marker, deque()).extend(behaviours)

    def script(self, function: Callable[[Any, int], Behaviour | None]) -> None:
        """Decide behaviour with `function(body, request_number)`; None falls through."""
        self._script = function

    def _choose(self, body: Any, number: int) -> Behaviour:
        if self._script is not None:
            chosen = self._script(body, number)
            if chosen is not None:
                return chosen
        text = _last_user_text(body) if isinstance(body, dict) else ""
        with self._lock:
            for marker, queue in self._queues.items():
                if queue and marker in text:
                    return queue.popleft()
        return reply(latency_s=self.latency_s)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> OpenAIServer:
        """Start serving on a free port of 127.0.0.1."""
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", 0)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, name="openai-test-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        """Stop serving and join the thread."""
        if self._loop is None:
            return
        loop = self._loop

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- HTTP ------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line, headers = await read_request_head(reader)
                _, path, _ = request_line.split(" ", 2)
                raw = await reader.readexactly(int(headers.get("content-length", "0")))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with self._lock:
                    self.requests.append(RecordedRequest(path, headers, body))
                    number = len(self.requests)
                behaviour = self._choose(body, number)
                if self.one_at_a_time:
                    if not await self._respond_in_turn(reader, writer, path, body, behaviour):
                        return
                elif not await self._respond(writer, path, body, behaviour):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _respond_in_turn(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        path: str,
        body: Any,
        behaviour: Behaviour,
    ) -> bool:
        """Answer when no other request is being answered; drop it if its client went away."""
        if self._serving is None:
            self._serving = asyncio.Lock()
        async with self._serving:
            if reader.at_eof():  # the client closed while this request waited its turn
                self.dropped += 1
                return False
            # The work takes `latency_s`; a client that closes meanwhile ends it (b"" read: EOF).
            working = asyncio.ensure_future(asyncio.sleep(behaviour.latency_s))
            closed = asyncio.ensure_future(reader.read(1))
            await asyncio.wait({working, closed}, return_when=asyncio.FIRST_COMPLETED)
            for task in (working, closed):
                task.cancel()
            await asyncio.gather(working, closed, return_exceptions=True)
            if closed.done() and not closed.cancelled():
                self.dropped += 1
                return False
            answer = dataclasses.replace(behaviour, latency_s=0.0)
            return await self._respond(writer, path, body, answer)

    async def _respond(
        self, writer: asyncio.StreamWriter, path: str, body: Any, behaviour: Behaviour
    ) -> bool:
        if self.strict_anthropic and path.endswith("/messages"):
            problem = anthropic_shape_error(body)
            if problem is not None:
                behaviour = Behaviour(
                    kind="status",
                    status=400,
                    body=json.dumps({"type": "error", "error": {"message": problem}}),
                )
        if behaviour.latency_s:
            await asyncio.sleep(behaviour.latency_s)
        if behaviour.kind == "drop":
            writer.transport.abort()
            return False
        extra = ""
        if behaviour.kind == "status":
            status, payload = behaviour.status, behaviour.body or "{}"
            if behaviour.retry_after is not None:
                extra = f"Retry-After: {behaviour.retry_after}\r\n"
        elif behaviour.kind == "malformed":
            status, payload = 200, behaviour.body or "{"
        else:
            status = 200
            payload = json.dumps(
                _anthropic_body(body, behaviour)
                if path.endswith("/messages")
                else _openai_body(body, behaviour)
            )
        data = payload.encode("utf-8")
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(data)}\r\n\r\n".encode("latin-1")
            + data
        )
        await writer.drain()
        return True


def _reply_text(body: Any, behaviour: Behaviour) -> str | None:
    if behaviour.tool_calls:
        return behaviour.text
    if behaviour.text is not None:
        return behaviour.text
    return f"echo: {_last_user_text(body)}"


def _openai_body(body: Any, behaviour: Behaviour) -> dict[str, Any]:
    text = _reply_text(body, behaviour)
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if behaviour.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
            }
            for index, call in enumerate(behaviour.tool_calls)
        ]
    choice: dict[str, Any] = {
        "index": 0,
        "message": message,
        "finish_reason": "tool_calls" if behaviour.tool_calls else "stop",
    }
    if isinstance(body, dict) and body.get("logprobs"):
        top = int(body.get("top_logprobs") or 0)
        choice["logprobs"] = {
            "content": [
                {
                    "token": word,
                    "logprob": -0.25 * (index + 1),
                    "top_logprobs": [
                        {
                            "token": word if k == 0 else f"{word}~{k}",
                            "logprob": -0.25 * (index + 1) - k,
                        }
                        for k in range(top)
                    ],
                }
                for index, word in enumerate(_words(text or ""))
            ]
        }
    prompt = " ".join(str(m.get("content")) for m in (body.get("messages") or []))
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": behaviour.model or body.get("model"),
        "choices": [choice],
        "usage": {
            "prompt_tokens": len(prompt.split()),
            "completion_tokens": len((text or "").split()),
            "total_tokens": len(prompt.split()) + len((text or "").split()),
        },
    }


def _anthropic_body(body: Any, behaviour: Behaviour) -> dict[str, Any]:
    text = _reply_text(body, behaviour)
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    for index, call in enumerate(behaviour.tool_calls or []):
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_{index}",
                "name": call["name"],
                "input": call["arguments"],
            }
        )
    prompt = " ".join(str(m.get("content")) for m in (body.get("messages") or []))
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": behaviour.model or body.get("model"),
        "content": content,
        "stop_reason": "tool_use" if behaviour.tool_calls else "end_turn",
        "usage": {"input_tokens": len(prompt.split()), "output_tokens": len((text or "").split())},
    }


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A started test server, stopped after the test."""
    with OpenAIServer() as server:
        yield server
