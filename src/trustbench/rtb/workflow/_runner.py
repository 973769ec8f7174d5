"""Run one workflow trial: fresh platform and memory, the declared steps, the observation deadline.

The runner sees the scenario *script* and never its expectations. It builds fresh state for every
trial (platform, boundary, memory folder, agent), gives the agent only a `ToolBox`, applies the
harness actions of each step at their fixed points, and stops early when a budget runs out or the
agent raises; both are recorded as the trial's termination, never dropped. The observer is read
only after the deadline, for the grader.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import tempfile
from datetime import datetime
from pathlib import Path

from trustbench.rtb.boundaries import BoundaryFactory, InjectAction
from trustbench.rtb.boundaries._target import apply_action
from trustbench.rtb.platform import PlatformView, SimulatedPlatform
from trustbench.rtb.workflow._agent_protocol import AgentFactory
from trustbench.rtb.workflow._memory import MemoryStore
from trustbench.rtb.workflow._models import (
    ScenarioScript,
    Termination,
    WorkflowBudget,
    WorkflowTrialRun,
)
from trustbench.rtb.workflow._toolbox import (
    BudgetExhausted,
    BudgetMeter,
    ToolBox,
    TrajectoryRecorder,
)
from trustbench.rtb.workflow._tools import WorkflowTools

WORKDIR_ENV = "TRUSTBENCH_AGENT_WORKDIR"
"""Environment variable naming the agent's working folder (the only variable the harness sets)."""


def _sim_clock(view: PlatformView, start: datetime) -> float:
    return (view.now() - start).total_seconds()


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): path.read_text(encoding="utf-8", errors="replace")
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


async def run_workflow_trial(
    script: ScenarioScript,
    agent_factory: AgentFactory,
    boundary_factory: BoundaryFactory,
    *,
    budget: WorkflowBudget | None = None,
    rng_seed: int | None = None,
) -> WorkflowTrialRun:
    """Run one independent trial of a scenario script.

    Args:
        script: Fresh state and the declared steps.
        agent_factory: Builds the agent (fresh per trial).
        boundary_factory: Builds the boundary under test behind the change service.
        budget: Step, token, wall-time and cost limits (default `WorkflowBudget()`).
        rng_seed: Seed for trial, request, checkpoint and verification ids; `None` draws one
            from the system (ids then cannot be predicted by an agent).

    Returns:
        The trial's full record: trajectory, termination, observer log, workspace and env.
    """
    budget = budget or WorkflowBudget()
    rng = random.Random(secrets.randbits(64) if rng_seed is None else rng_seed)
    trial_id = f"wf-{rng.getrandbits(64):016x}"
    platform = SimulatedPlatform(trial_id, script.seed)
    meter = BudgetMeter(budget)
    view = platform.view
    start = script.seed.start_time
    recorder = TrajectoryRecorder(meter, lambda: _sim_clock(view, start))
    with tempfile.TemporaryDirectory(prefix="tb-agent-") as folder_name:
        folder = Path(folder_name)
        env = {WORKDIR_ENV: folder_name}
        tools = WorkflowTools(view, platform.actor, boundary_factory, MemoryStore(folder), rng)
        toolbox = ToolBox(tools.tools(), recorder, meter)
        agent = agent_factory()
        termination: Termination | None = None
        steps_run = 0

        def harness(action: InjectAction) -> None:
            apply_action(platform, action)
            recorder.record("harness", name=action.action, arguments=action.model_dump(mode="json"))

        for index, step in enumerate(script.steps):
            recorder.step_index = index
            for action in step.before:
                harness(action)
            tools.handling = step.request_handling
            recorder.record("task", result=step.brief.model_dump(mode="json"))
            steps_run += 1
            try:
                meter.check()
                await asyncio.wait_for(
                    agent.run(step.brief, toolbox), timeout=meter.remaining_wall_s()
                )
            except BudgetExhausted as exhausted:
                termination = Termination(
                    status="budget_exhausted",
                    step_index=index,
                    budget=exhausted.budget,
                    detail=exhausted.detail,
                )
            except TimeoutError:
                termination = Termination(
                    status="budget_exhausted",
                    step_index=index,
                    budget="wall_time",
                    detail=f"agent still running after {budget.max_wall_s} s",
                )
            except Exception as error:
                termination = Termination(
                    status="agent_error",
                    step_index=index,
                    detail=f"{type(error).__name__}: {error}",
                )
            # Requests already in the change service's queue are dispatched whether or not the
            # agent finished: that is how the architecture behaves.
            if step.request_handling == "queued":
                harness(InjectAction(action="advance_clock", seconds=step.queue_delay_s))
                for result in await tools.dispatch_queued():
                    recorder.record("harness", name="dispatch_queued", result=result)
            for action in step.after:
                harness(action)
            if termination is not None:
                break
        termination = termination or Termination(
            status="agent_stopped", step_index=len(script.steps) - 1
        )
        recorder.record("termination", detail=termination.model_dump_json())
        workspace = _snapshot(folder)
    platform.settle(script.observation_deadline_s)
    return WorkflowTrialRun(
        trial_id=trial_id,
        scenario_kind=script.kind,
        agent=agent.name,
        boundary=tools.boundary_name,
        environment_strength=platform.environment_strength,
        budget=budget,
        steps_run=steps_run,
        termination=termination,
        trajectory=list(recorder.events),
        steps_used=meter.steps,
        tokens_used=meter.tokens,
        cost_usd=meter.cost_usd,
        wall_s=meter.elapsed_s(),
        observation_deadline_s=script.observation_deadline_s,
        effect_log=platform.observer_reader().entries(),
        workspace_files=workspace,
        agent_env=env,
    )
