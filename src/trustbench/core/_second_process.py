"""A second process beside this one that runs this process's calls one at a time, in order.

`report` has one verify the ledger while it grades (`_verify.py`), then compile the page's
template while it still grades and write the page while it writes the record
(`_report_run.py`). Each call is a module-level function and its arguments, sent down a pipe
and answered with its result or the exception it raised; nothing else is shared. On the
2,000-trial report of `python -m bench.report_speed` (2 cores, 20 alternations, bench/README
"Sixth pass") the verification beside took the report from 0.68 s to 0.61 s of wall, the page
beside to 0.57 s.

Where a fork is safe (`_verify.forks_safely`) the process is forked: it starts in milliseconds
with every module of this one already imported. What is alive at the fork is then frozen for
the garbage collector until the process is stopped (`gc.freeze`, as Python's documentation
advises before a fork), so neither process's collector walks, and so copies, the pages they
share, and the child's collector stays off, so no copy of the parent's objects (a connection
awaiting collection) is finalized in it. Elsewhere it is spawned: a fresh interpreter, about
half a second to start.
"""

from __future__ import annotations

import gc
import signal
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Generic, Literal, TypeVar, cast

from trustbench.core._runner import long_lived_objects_frozen
from trustbench.errors import TrustbenchError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection, _ConnectionBase

T = TypeVar("T")

StartMethod = Literal["fork", "spawn"]
"""How the second process is started (`multiprocessing`'s names)."""


@dataclass(frozen=True)
class Asked(Generic[T]):
    """A call sent to the second process: its place in the order of calls (`SecondProcess.ask`)."""

    number: int


_STOPPING_SIGNALS = {signal.SIGINT, signal.SIGTERM}
"""Held back from the second process until it has its own handlers (`_serve`)."""


def _serve(connection: Connection, *, forked: bool) -> None:
    """The second process: answer each call received, in order, until told to stop.

    Ctrl-C reaches every process of the terminal's group: this one ignores it, and the parent,
    interrupted, stops it (`SecondProcess.__exit__`), so an interrupted command prints nothing
    from here. The stop (SIGTERM) kills it outright: a handler the parent had installed (Ray's
    raises `SystemExit`) would otherwise run here. Both signals were blocked from before the
    fork (`SecondProcess.__init__`) until these handlers are set: one arriving between the fork
    and `multiprocessing`'s own `try` would have unwound the parent's copied stack in this
    process, which then went on running the parent's code.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPPING_SIGNALS)
    if forked:
        gc.disable()  # never finalize a copy of the parent's objects (module docstring)
    while (call := connection.recv()) is not None:
        function, arguments = call
        try:
            answer: tuple[bool, object] = (True, function(*arguments))
        except Exception as error:  # sent: the caller raises it (`SecondProcess.answer`)
            answer = (False, error)
        connection.send(answer)


class SecondProcess:
    """A started second process (see the module docstring); use as a context manager.

    Leaving the context stops it: at once after an error or an interrupt (calls in flight are
    dropped), else once it has answered every call.
    """

    def __init__(self, start: StartMethod) -> None:
        import multiprocessing

        self._frozen = ExitStack()
        if start == "fork":
            self._frozen.enter_context(long_lived_objects_frozen())
        context = (
            multiprocessing.get_context("fork")
            if start == "fork"
            else multiprocessing.get_context("spawn")
        )
        ours, theirs = context.Pipe()
        process = context.Process(
            target=_serve,
            args=(theirs,),
            kwargs={"forked": start == "fork"},
            name="trustbench-second-process",
            daemon=True,
        )
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING_SIGNALS)  # see `_serve`
        try:
            process.start()
        except BaseException:
            self._frozen.close()  # no second process: nothing is left frozen
            raise
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        theirs.close()  # its end: once it exits, a read here ends instead of waiting
        self._process = process
        self._connection: _ConnectionBase = ours  # (a `PipeConnection` on Windows)
        self._asked = 0
        self._answers: list[tuple[bool, object]] = []

    def ask(self, function: Callable[..., T], *arguments: object) -> Asked[T]:
        """Send the call `function(*arguments)`; its answer is read by `answer`.

        `function` is pickled by reference (a module-level function) and `arguments` by value.
        """
        self._connection.send((function, arguments))
        self._asked += 1
        return Asked(self._asked - 1)

    def answer(self, asked: Asked[T]) -> T:
        """The result of the call `asked` (waits for it and every call sent before it).

        Raises:
            Exception: what the call raised in the second process.
            TrustbenchError: the second process ended (was killed) without answering.
        """
        while len(self._answers) <= asked.number:
            try:
                self._answers.append(self._connection.recv())
            except (EOFError, OSError):  # closed, or reset with a call it never read
                self._process.join()
                raise TrustbenchError(
                    f"the second process of this command ended without an answer (exit code "
                    f"{self._process.exitcode}); what it was to answer was not done"
                ) from None
        answered, value = self._answers[asked.number]
        if not answered:
            raise cast("Exception", value)
        return cast("T", value)

    def __enter__(self) -> SecondProcess:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if error is None:
                try:
                    while len(self._answers) < self._asked:  # read what no caller read: an
                        self._answers.append(self._connection.recv())  # answer never blocks it
                    self._connection.send(None)  # done: it exits
                except (EOFError, OSError):
                    self._process.terminate()  # it has already gone
            else:
                self._process.terminate()  # an error or an interrupt: stop it now
            self._process.join()
            self._connection.close()
        finally:
            self._frozen.close()
