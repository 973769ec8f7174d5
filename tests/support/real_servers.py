"""Real server software for the provider tests: uvicorn (an ASGI app), nginx, tinyproxy.

Each runs on 127.0.0.1 on a free port, for the duration of a `with` block:

- `uvicorn_app(app)`: an ASGI app served by uvicorn in a background thread;
- `nginx_reverse_proxy(upstream, folder, keepalive_timeout="300ms")`: nginx in front of it,
  closing idle client connections after `keepalive_timeout` (without saying so: a FIN);
- `tinyproxy_forward_proxy(folder)`: tinyproxy as an HTTP forward proxy (it adds a `Via` header,
  so a test can see that a request went through it).

nginx and tinyproxy are Debian packages (`.ci/run` installs them): where a binary is missing the
fixture skips the test, naming the package. `chat_app` is a minimal OpenAI-compatible ASGI app
that echoes the last user message and keeps every request's headers.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.support.child_env import child_env


def free_port() -> int:
    """A port nothing listens on now (bound and released: a tiny race, fine on 127.0.0.1)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_listening(port: int, process: subprocess.Popen[bytes] | None, what: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            _, err = process.communicate()
            raise RuntimeError(f"{what} exited: {err.decode(errors='replace')[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within 10 s")


def require_binary(name: str, package: str) -> str:
    """The path of `name`, or skip the test saying which Debian package provides it."""
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin")
    if path is None:
        pytest.skip(f"{name} is not installed (Debian package `{package}`; .ci/run installs it)")
    return path


@dataclass
class ChatApp:
    """A minimal OpenAI-compatible ASGI app: echoes the last user message, with usage."""

    requests: list[dict[str, str]] = field(default_factory=list)
    """Headers (names lower-case) of every request received."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.requests.append(
            {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        )
        request = json.loads(body or b"{}")
        last = (request.get("messages") or [{"content": ""}])[-1]["content"]
        document = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": request.get("model", "m"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"echo: {last}"},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
        }
        payload = json.dumps(document).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


@contextlib.contextmanager
def uvicorn_app(app: Any, *, timeout_keep_alive: int = 5) -> Iterator[int]:
    """Serve `app` with uvicorn on 127.0.0.1 in a background thread; yields the port."""
    uvicorn = pytest.importorskip("uvicorn", reason="uvicorn is in the dev extra")
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="off",
        timeout_keep_alive=timeout_keep_alive,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        _wait_listening(port, None, "uvicorn")
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


@contextlib.contextmanager
def nginx_reverse_proxy(
    upstream_port: int, folder: Path, *, keepalive_timeout: str = "300ms"
) -> Iterator[int]:
    """nginx on 127.0.0.1 proxying to `upstream_port`; yields its port."""
    binary = require_binary("nginx", "nginx")
    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    temp = "\n".join(
        f"  {kind}_temp_path {folder / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    conf = folder / "nginx.conf"
    conf.write_text(
        f"""daemon off;
master_process off;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} warn;
events {{ worker_connections 512; }}
http {{
  access_log off;
{temp}
  keepalive_timeout {keepalive_timeout};
  upstream app {{ server 127.0.0.1:{upstream_port}; keepalive 16; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}
}}
"""
    )
    process = subprocess.Popen(
        [binary, "-p", str(folder), "-c", str(conf), "-e", str(folder / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=child_env(folder),
    )
    try:
        _wait_listening(port, process, "nginx")
        yield port
    finally:
        process.terminate()
        process.wait(10)


@contextlib.contextmanager
def tinyproxy_forward_proxy(folder: Path) -> Iterator[int]:
    """tinyproxy on 127.0.0.1 as a forward proxy (adds `Via`); yields its port."""
    binary = require_binary("tinyproxy", "tinyproxy")
    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "tinyproxy.conf"
    conf.write_text(
        f"Port {port}\nListen 127.0.0.1\nTimeout 30\nAllow 127.0.0.1\nMaxClients 64\n"
        f'LogLevel Warning\nPidFile "{folder / "tinyproxy.pid"}"\n'
    )
    process = subprocess.Popen(
        [binary, "-d", "-c", str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=child_env(folder),
    )
    try:
        _wait_listening(port, process, "tinyproxy")
        yield port
    finally:
        process.terminate()
        process.wait(10)


_CLOSING_SERVER = r"""
import asyncio, json, socket, sys

async def read_head(reader):
    headers = {}
    await reader.readline()
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers

async def handle(reader, writer):
    try:
        headers = await read_head(reader)
        request = json.loads(await reader.readexactly(int(headers.get("content-length", 0))))
        last = (request.get("messages") or [{"content": ""}])[-1]["content"]
        body = json.dumps({
            "id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": f"echo: {last}"}}],
        }).encode()
        if hasattr(socket, "TCP_CORK"):  # hold the response until the FIN joins it (Linux)
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        writer.write_eof()  # the FIN, sent with the response in one segment
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


class ClosingServer:
    """A raw HTTP/1.1 server that closes every connection right after its response, saying nothing.

    Its responses carry `Content-Length` and no `Connection: close`, so a client may pool the
    connection, and then finds it dead when it sends on it: the fault a pooled client must survive.
    It runs in its own process, as a real server would: in a thread of the test's process the
    GIL would let the client send its next request between the server's response and its close,
    a race of the test's making (under load it failed a quarter of the requests whatever the
    client did). For the same reason the FIN leaves in the response's own segment (`TCP_CORK`,
    then `write_eof`): sent a loop turn later, a loaded CI machine let 14 of 120 requests reuse
    the connection before the server had closed it. `port` is set inside the `with` block;
    closing standard input stops it.
    """

    def __init__(self, folder: Path) -> None:
        self.port = 0
        self._folder = folder
        """The test's temporary folder (the server process's HOME and TMPDIR are made there)."""
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> ClosingServer:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _CLOSING_SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(self._folder),
        )
        assert self._process.stdout is not None
        self.port = int(self._process.stdout.readline())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.close()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)
