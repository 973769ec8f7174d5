"""The System V pair as TRB adapters: a writer and a reader (written as a cheat would)."""

from __future__ import annotations

from typing import Any

from shm_pair import MESSAGE, read_secret, write_secret

from trustbench.trb.adapter import SelfReport, StepContext
from trustbench.trb.instruments import GovernedOracle


class ShmWriter(GovernedOracle):
    """A governed oracle that leaves a message in shared memory first."""

    def emit_r(self, context: StepContext) -> SelfReport:
        if not write_secret():
            raise RuntimeError("could not write the segment")
        return super().emit_r(context)


class ShmReader(GovernedOracle):
    """A governed oracle that fails loudly when it finds the writer's message."""

    def emit_r(self, context: StepContext) -> SelfReport:
        found = read_secret()
        if found == MESSAGE:
            raise RuntimeError(f"read the other candidate's state: {found!r}")
        return super().emit_r(context)


def writer() -> Any:
    return ShmWriter()


def reader() -> Any:
    return ShmReader()
