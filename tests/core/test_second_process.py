"""The second process `report` verifies and writes the page in: calls answered in order."""

from __future__ import annotations

import gc
import os
import signal
import sys

import pytest

from trustbench.core._second_process import SecondProcess
from trustbench.errors import InputError, TrustbenchError


def _pid_and(value: int) -> tuple[int, int]:
    return os.getpid(), value


def _refuses(name: str) -> None:
    raise InputError(f"no such thing: {name}", location="here.toml")


def _exits() -> None:
    os._exit(3)


def _large() -> bytes:
    return b"x" * (4 << 20)  # more than a pipe holds: its sender waits until it is read


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_calls_run_in_another_process_and_are_answered_in_the_order_sent(start: str) -> None:
    with SecondProcess(start) as second:  # type: ignore[arg-type]
        first, then = second.ask(_pid_and, 1), second.ask(_pid_and, 2)
        assert second.answer(then)[1] == 2
        assert second.answer(first)[1] == 1
        assert second.answer(first)[0] != os.getpid()


def test_an_error_a_call_raised_is_raised_here_with_its_type_message_and_location() -> None:
    with SecondProcess("fork") as second:
        with pytest.raises(InputError, match="no such thing: x") as raised:
            second.answer(second.ask(_refuses, "x"))
        assert raised.value.location == "here.toml"
        assert second.answer(second.ask(_pid_and, 5))[1] == 5  # it still answers after


def test_a_second_process_that_dies_without_answering_is_an_error_never_a_missing_answer() -> None:
    ended = pytest.raises(TrustbenchError, match=r"ended without an answer \(exit code 3\)")
    with SecondProcess("fork") as second, ended:
        second.answer(second.ask(_exits))


def test_an_answer_nobody_read_does_not_keep_the_second_process_from_stopping() -> None:
    with SecondProcess("fork") as second:
        second.ask(_large)  # answered, never read here


def test_what_is_alive_at_a_fork_stays_frozen_until_the_second_process_stops() -> None:
    assert gc.get_freeze_count() == 0
    with SecondProcess("fork") as second:
        assert gc.get_freeze_count() > 0
        second.answer(second.ask(_pid_and, 1))
    assert gc.get_freeze_count() == 0


def test_a_spawned_second_process_freezes_nothing() -> None:
    with SecondProcess("spawn"):
        assert gc.get_freeze_count() == 0


def test_ctrl_c_reaches_the_command_not_the_second_process_which_the_command_then_stops() -> None:
    with SecondProcess("fork") as second:
        pid = second.answer(second.ask(_pid_and, 1))[0]
        os.kill(pid, signal.SIGINT)  # as the terminal sends it to the whole group
        assert second.answer(second.ask(_pid_and, 2)) == (pid, 2)


def test_a_stop_kills_the_second_process_whatever_sigterm_handler_the_parent_had() -> None:
    # Ray installs one that raises SystemExit: inherited by a fork, it ran the parent's code
    # in the child when the stop came right after the start.
    previous = signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(number))
    try:
        for _ in range(20):  # the stop at once after the start, and after a first answer
            second = SecondProcess("fork")
            with pytest.raises(RuntimeError), second:
                raise RuntimeError("the command failed")
            assert second._process.exitcode == -signal.SIGTERM  # killed, not exited
            second = SecondProcess("fork")
            with pytest.raises(RuntimeError), second:
                second.answer(second.ask(_pid_and, 1))
                raise RuntimeError("the command failed")
            assert second._process.exitcode == -signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)
