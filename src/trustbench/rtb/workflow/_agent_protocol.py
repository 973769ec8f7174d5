"""The one interface every workflow agent implements."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from trustbench.rtb.workflow._models import TaskBrief
from trustbench.rtb.workflow._toolbox import ToolBox


@runtime_checkable
class WorkflowAgent(Protocol):
    """An agent under test: it receives one task at a time and a tool box, and returns when done.

    The same instance receives every step of one scenario trial (a long-running agent); a fresh
    instance is built for every independent trial. Everything it learns comes from the brief and
    tool results; whatever it claims is checked against the observer, never believed.
    """

    name: str
    """Stable name recorded with every result."""

    async def run(self, brief: TaskBrief, tools: ToolBox) -> None:
        """Work on one task until done; every tool call goes through `tools`."""
        ...


AgentFactory = Callable[[], WorkflowAgent]
"""Builds a fresh agent for one independent trial."""
