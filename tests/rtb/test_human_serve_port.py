"""`rtb human serve`: a used port is refused at once (the port and what to do, exit 2), and a
free one still serves the links from the very socket it checked."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest
from tests.rtb.test_human_browser import start_server
from tests.rtb.test_human_fixtures import runs  # noqa: F401
from tests.support.cli import invoke
from tests.support.readiness import READY_TIMEOUT_S


def test_a_port_in_use_is_reported_at_once_with_the_port_and_what_to_do(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        # No run folder exists: the port is checked before anything is opened or set up.
        code, message = invoke("rtb", "human", "serve", str(tmp_path / "none"), "--port", str(port))
    assert code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in message
    assert "choose another with --port N" in message and "--port 0" in message


@pytest.mark.parametrize(
    ("host", "said"),
    [
        ("", "--host is empty"),
        ("   ", "--host is empty"),
        ("no-such-host.invalid", "--host takes an address or host name of this machine"),
        ("192.0.2.1", "192.0.2.1 is not an address of this machine"),  # TEST-NET-1
    ],
)
def test_a_host_that_cannot_be_listened_on_is_named_not_the_port(
    tmp_path: Path, host: str, said: str
) -> None:
    # An empty host would have listened on every interface (and printed `http://:PORT` links).
    code, message = invoke("rtb", "human", "serve", str(tmp_path / "none"), "--host", host)
    assert code == 2
    assert said in message and "--port" not in message.replace("--port 0", ""), message


def test_a_free_port_serves_one_link_per_participant(runs: tuple[Path, Path]) -> None:  # noqa: F811
    _, human_dir = runs
    server, links = start_server(human_dir)
    try:
        assert set(links) == {"sre-cab-p01", "sre-cab-p02"}
        assert all(link.startswith("http://127.0.0.1:") for link in links.values())
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=READY_TIMEOUT_S) == 0


def test_sigint_stops_the_server_even_when_it_started_with_sigint_ignored(
    runs: tuple[Path, Path],  # noqa: F811
) -> None:
    _, human_dir = runs
    server, _ = start_server(human_dir, sigint_ignored=True)
    server.send_signal(signal.SIGINT)
    try:
        assert server.wait(timeout=READY_TIMEOUT_S) == 0
    finally:
        server.kill()
