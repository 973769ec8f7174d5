"""Tools as plain typed functions, their schemas, the recorded call path and the budget meter.

AgentDojo style: a tool is an async function (or bound method) with type hints and a Google-style
docstring; `tool_schema` turns it into an OpenAI function-tool schema, so a scripted agent and an
LLM agent see exactly the same interface. Every call goes through `ToolBox.call`, which charges the
step budget, validates the arguments, runs the tool, records call and result in the trajectory,
and returns a JSON copy (an agent cannot reach the environment's objects through a result).
"""

from __future__ import annotations

import inspect
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import lru_cache
from typing import Any, get_type_hints

from pydantic import ConfigDict, ValidationError, create_model

from trustbench.rtb.workflow._models import (
    BudgetName,
    EventKind,
    ModelUsage,
    TrajectoryEvent,
    WorkflowBudget,
)

Tool = Callable[..., Awaitable[dict[str, Any]]]
"""An async tool returning JSON-able data."""

_ARG_LINE = re.compile(r"^\s{4}(?P<name>\w+)(?: \([^)]*\))?:\s*(?P<text>.*)$")


class BudgetExhausted(Exception):
    """A trial budget ran out; the runner ends the trial as `budget_exhausted`."""

    def __init__(self, budget: BudgetName, detail: str) -> None:
        self.budget: BudgetName = budget
        self.detail = detail
        super().__init__(f"{budget} budget exhausted: {detail}")


def _docstring_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(fn) or ""
    summary = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    args: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in doc.splitlines():
        if line.strip() == "Args:":
            in_args = True
            continue
        if in_args:
            if line and not line.startswith(" "):
                break
            match = _ARG_LINE.match(line)
            if match:
                name: str = match["name"]
                args[name] = match["text"].strip()
                current = name
            elif current and line.strip():
                args[current] += " " + line.strip()
    return summary, args


def tool_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """The OpenAI function-tool schema of `fn`, from its type hints and docstring.

    Args:
        fn: A tool (function or bound method) with type hints and a Google-style docstring whose
            `Args:` section describes every parameter.

    Returns:
        `{"type": "function", "function": {"name", "description", "parameters"}}`.
    """
    summary, arg_docs = _docstring_parts(fn)
    model = _arguments_model(fn)
    parameters = model.model_json_schema()
    parameters.pop("title", None)
    for name, prop in parameters.get("properties", {}).items():
        prop.pop("title", None)
        if name in arg_docs:
            prop["description"] = arg_docs[name]
    return {
        "type": "function",
        "function": {"name": fn.__name__, "description": summary, "parameters": parameters},
    }


def _arguments_model(fn: Callable[..., Any]) -> type[Any]:
    """The pydantic model of `fn`'s arguments (made once per function, not once per call).

    Making a model is about 1.5 ms, and a workflow run calls tools tens of thousands of times
    (it was a sixth of the demo's workflow step); tools are bound methods of each trial's
    toolbox, so the model is kept per underlying function and whether it is bound (`self` is
    then not an argument), never per toolbox.
    """
    function = getattr(fn, "__func__", fn)
    return _model_of(function, function is not fn)


@lru_cache(maxsize=512)
def _model_of(function: Callable[..., Any], bound: bool) -> type[Any]:
    hints = get_type_hints(function)
    parameters = list(inspect.signature(function).parameters.values())[1 if bound else 0 :]
    fields: dict[str, Any] = {}
    for param in parameters:
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints[param.name], default)
    name = f"{function.__name__}_arguments"
    return create_model(name, __config__=ConfigDict(extra="forbid"), **fields)


class BudgetMeter:
    """Counts steps, tokens, cost and wall time of one trial against its budget.

    Args:
        budget: The trial's budget.
        clock: Monotonic wall clock (injectable for tests).
    """

    def __init__(self, budget: WorkflowBudget, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget = budget
        self._clock = clock
        self._started = clock()
        self.steps = 0
        self.tokens = 0
        self.cost_usd: float | None = 0.0

    def elapsed_s(self) -> float:
        """Wall seconds since the trial started."""
        return self._clock() - self._started

    def remaining_wall_s(self) -> float | None:
        """Wall seconds left, or `None` without a time budget."""
        limit = self.budget.max_wall_s
        return None if limit is None else max(0.0, limit - self.elapsed_s())

    def check(self) -> None:
        """Raise `BudgetExhausted` when time, tokens or cost are already over budget."""
        b = self.budget
        if b.max_wall_s is not None and self.elapsed_s() > b.max_wall_s:
            raise BudgetExhausted("wall_time", f"{self.elapsed_s():.2f} s > {b.max_wall_s} s")
        if b.max_tokens is not None and self.tokens > b.max_tokens:
            raise BudgetExhausted("tokens", f"{self.tokens} > {b.max_tokens}")
        if b.max_cost_usd is not None and (self.cost_usd or 0.0) > b.max_cost_usd:
            raise BudgetExhausted("cost", f"${self.cost_usd} > ${b.max_cost_usd}")

    def charge_step(self) -> None:
        """Count one step (tool or model call) before it runs; raise when it would exceed."""
        self.check()
        if self.steps + 1 > self.budget.max_steps:
            raise BudgetExhausted("steps", f"step {self.steps + 1} > {self.budget.max_steps}")
        self.steps += 1

    def charge_usage(self, usage: ModelUsage) -> None:
        """Add a model call's reported usage (unknown cost makes the total unknown)."""
        self.tokens += (usage.prompt_tokens or 0) + (usage.completion_tokens or 0)
        if usage.cost_usd is None:
            self.cost_usd = None
        elif self.cost_usd is not None:
            self.cost_usd += usage.cost_usd


class TrajectoryRecorder:
    """Appends trajectory events with wall and simulated time stamps.

    Args:
        meter: The trial's meter (wall time).
        sim_clock: Simulated seconds since trial start.
    """

    def __init__(self, meter: BudgetMeter, sim_clock: Callable[[], float]) -> None:
        self.events: list[TrajectoryEvent] = []
        self.step_index = 0
        self._meter = meter
        self._sim_clock = sim_clock

    def record(self, kind: EventKind, **fields: Any) -> TrajectoryEvent:
        """Append one event for the current step."""
        event = TrajectoryEvent(
            seq=len(self.events),
            step_index=self.step_index,
            kind=kind,
            wall_s=self._meter.elapsed_s(),
            sim_s=self._sim_clock(),
            **fields,
        )
        self.events.append(event)
        return event


class ToolBox:
    """The agent's whole interface to the environment: named tools, their schemas, one call path.

    Args:
        tools: Tool name -> async tool.
        recorder: The trial's trajectory recorder.
        meter: The trial's budget meter.
    """

    def __init__(
        self, tools: Mapping[str, Tool], recorder: TrajectoryRecorder, meter: BudgetMeter
    ) -> None:
        self._tools = dict(tools)
        self._recorder = recorder
        self._meter = meter

    @property
    def names(self) -> list[str]:
        """Tool names, sorted."""
        return sorted(self._tools)

    def specs(self) -> list[dict[str, Any]]:
        """OpenAI function-tool schemas of every tool."""
        return [tool_schema(self._tools[name]) for name in self.names]

    async def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool; the result is recorded and returned as a JSON copy.

        Invalid arguments or an unknown tool give `{"error": ...}` (recorded like any result).

        Raises:
            BudgetExhausted: When the step, time, token or cost budget is spent.
        """
        args = dict(arguments or {})
        self._meter.charge_step()
        tool = self._tools.get(name)
        if tool is None:
            result: dict[str, Any] = {"error": f"unknown tool {name!r}; tools: {self.names}"}
        else:
            try:
                validated = _arguments_model(tool).model_validate(args)
                result = await tool(
                    **{k: getattr(validated, k) for k in type(validated).model_fields}
                )
            except ValidationError as error:
                result = {
                    "error": f"invalid arguments for {name}: {error.errors(include_url=False)}"
                }
        copied = json.loads(json.dumps(result, default=str))
        self._recorder.record("tool_call", name=name, arguments=args, result=copied)
        return json.loads(json.dumps(copied))

    def reject_call(self, name: str, raw_arguments: str, reason: str) -> dict[str, Any]:
        """Charge and record a tool call whose arguments could not be parsed; return the error.

        Raises:
            BudgetExhausted: When the step, time, token or cost budget is spent.
        """
        self._meter.charge_step()
        result = {"error": f"{name}: {reason}"}
        self._recorder.record(
            "tool_call", name=name, arguments={"unparsed": raw_arguments}, result=result
        )
        return dict(result)

    def record_model_call(self, usage: ModelUsage, detail: str = "") -> None:
        """Charge and record one model call (LLM agents call this after each chat turn)."""
        self._meter.charge_usage(usage)
        self._recorder.record("model_call", usage=usage, detail=detail)

    def charge_model_step(self) -> None:
        """Charge the step budget for a model call before it is made."""
        self._meter.charge_step()

    def check_budget(self) -> None:
        """Raise `BudgetExhausted` when time, tokens or cost are already over budget."""
        self._meter.check()

    def remaining_wall_s(self) -> float | None:
        """Wall seconds left in the trial, or `None` without a time budget."""
        return self._meter.remaining_wall_s()
