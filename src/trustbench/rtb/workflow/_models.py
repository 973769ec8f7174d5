"""Contracts of the RTB workflow track: task briefs, scenario scripts, expectations, trajectories.

The split follows the control-path track. What the harness runs (`ScenarioScript`) carries no
expectation; what the agent receives (`TaskBrief`) is the only candidate-visible data besides tool
results; what the grader reads (`ScenarioExpectations`) lives beside the script in
`WorkflowScenario` and is never handed to the runner, the tools or the agent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, StrictFloat, StrictInt

from trustbench._docstrings import documented
from trustbench.rtb.boundaries import InjectAction
from trustbench.rtb.corpus._models import ParamValue
from trustbench.rtb.platform import EffectEntry, PlatformSeed


class _Frozen(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class ChangeSpec(_Frozen):
    """A change to a resource: an operation with exact parameters on one target."""

    operation: str
    """Operation name, e.g. `set_backup_retention`."""
    target: str
    """Resource id."""
    parameters: dict[str, ParamValue]
    """Exact parameters (compared as RFC 8785 canonical JSON)."""


class ProposedChange(ChangeSpec):
    """A change as a task proposes it, with the revision it was prepared against."""

    resource_revision: str
    """The resource revision the proposal was prepared against."""


BriefKind = Literal["apply_proposal", "apply_approved", "survey", "resume_checkpoint"]
"""What a task asks: apply a stated proposal; apply whatever the approval service authorizes for
an operation on a target; survey a resource and keep notes; resume checkpointed requests."""


class TaskBrief(_Frozen):
    """What the agent receives for one step. Candidate-visible: no answer key, no case id."""

    kind: BriefKind
    """What the task asks (see `BriefKind`)."""
    instruction: str
    """The task in words."""
    target: str
    """The resource the task concerns."""
    operation: str | None = None
    """For `apply_approved`: the operation to apply."""
    proposal: ProposedChange | None = None
    """For `apply_proposal`: the change proposed."""


RequestHandling = Literal["immediate", "queued", "crash_after_authorization"]
"""How the change service handles a request during a step: dispatch at once; authorize now and
dispatch after the step from a queue (the harness lets queue time pass); or authorize, checkpoint
and crash before dispatch (the checkpoint can be resumed by a recovered service instance)."""


class StepScript(_Frozen):
    """One step of a scenario as the harness runs it. Contains no expectation."""

    brief: TaskBrief
    """The task given to the agent."""
    before: list[InjectAction] = Field(default_factory=list)
    """Harness actions before the agent starts (faults, expiry settings)."""
    request_handling: RequestHandling = "immediate"
    """How `request_change` behaves in this step."""
    queue_delay_s: float = Field(default=0.0, ge=0.0)
    """For `queued`: simulated seconds queued requests wait before dispatch."""
    before_dispatch: list[InjectAction] = Field(default_factory=list)
    """Harness actions after the agent's turn and before the queued requests are dispatched
    (e.g. an operator stop between proposal and dispatch)."""
    after: list[InjectAction] = Field(default_factory=list)
    """Harness actions after the step (e.g. a revocation while the service is down)."""


class ScenarioScript(_Frozen):
    """What the harness runs for one trial: fresh state, then steps that share it."""

    kind: str
    """`direct` for a corpus task, or the stateful scenario kind."""
    seed: PlatformSeed
    """Initial platform state (built fresh for every trial)."""
    steps: list[StepScript] = Field(min_length=1)
    """The declared sequence; platform state and the memory store carry over between these steps
    only, and are rebuilt for the next independent trial."""
    observation_deadline_s: float = Field(gt=0)
    """Simulated seconds after trial start by which the observer must establish outcomes."""


class StepExpectation(_Frozen):
    """Grader-only: what the observer must see for one step."""

    requested_change: ChangeSpec | None
    """The change the step's task asks for (for `apply_approved`, the approved one); `None` for
    tasks that ask for no change."""
    allowed: bool
    """Whether `requested_change` may take effect (False: it is a prohibited effect)."""
    expectation_source: str
    """Where `allowed` comes from, in words."""


class ScenarioExpectations(_Frozen):
    """Grader-only expectations of one scenario."""

    steps: list[StepExpectation]
    """One per script step."""
    tempts_prohibited_effect: bool
    """Whether the scenario offers a prohibited effect by design (prohibited-effect denominator)."""

    def allowed_changes(self) -> list[ChangeSpec]:
        """Changes that may each take effect once; every other mutation is prohibited."""
        return [s.requested_change for s in self.steps if s.allowed and s.requested_change]


class WorkflowScenario(_Frozen):
    """One workflow scenario: the script the harness runs plus the grader's expectations."""

    scenario_id: str
    """`<case_id>/<kind>`."""
    case_id: str
    """The corpus case it derives from."""
    group: str
    """The case's domain group."""
    script: ScenarioScript
    """What the harness runs (no expectation inside)."""
    expectations: ScenarioExpectations
    """Grader-only."""


class WorkflowBudget(_Frozen):
    """Per-trial limits; exceeding one ends the trial as `budget_exhausted` (recorded, graded)."""

    max_steps: StrictInt = Field(default=60, ge=1)
    """Tool calls plus model calls."""
    max_tokens: StrictInt | None = Field(default=None, ge=1)
    """Prompt plus completion tokens reported by the model service; `None`: no limit."""
    max_wall_s: StrictFloat | None = Field(default=120.0, gt=0)
    """Wall-clock seconds for the whole trial; `None`: no limit."""
    max_cost_usd: StrictFloat | None = Field(default=None, gt=0)
    """Reported cost in US dollars; `None`: no limit."""


BudgetName = Literal["steps", "tokens", "wall_time", "cost"]
"""Which budget ran out."""


class ModelUsage(_Frozen):
    """Usage one model call reported."""

    prompt_tokens: int | None = None
    """Input tokens, when reported."""
    completion_tokens: int | None = None
    """Output tokens, when reported."""
    cost_usd: float | None = None
    """Cost, when known."""


EventKind = Literal["task", "tool_call", "model_call", "harness", "termination"]
"""What a trajectory event records."""


class TrajectoryEvent(_Frozen):
    """One recorded event of a trial; the full trajectory is kept, nothing is dropped."""

    seq: int
    """Position in the trajectory, from 0."""
    step_index: int
    """The scenario step during which it happened."""
    kind: EventKind
    """`task` (brief given), `tool_call`, `model_call`, `harness` (a queued dispatch or a fault
    applied by the harness), `termination`."""
    wall_s: float
    """Wall seconds since the trial started."""
    sim_s: float
    """Simulated platform seconds since the trial started."""
    name: str | None = None
    """Tool name for `tool_call`; action name for `harness`."""
    arguments: dict[str, Any] | None = None
    """Tool arguments as the agent sent them."""
    result: Any = None
    """The tool result exactly as returned to the agent (or the harness action's result)."""
    usage: ModelUsage | None = None
    """For `model_call`."""
    duration_s: float | None = None
    """Wall seconds the call took, for `tool_call` and `model_call` (`None`: not measured, as in
    runs recorded before it was)."""
    detail: str = ""
    """Free text."""


TerminationStatus = Literal["agent_stopped", "budget_exhausted", "agent_error"]
"""How a trial ended: the agent returned after every step; a budget ran out; the agent raised."""


class Termination(_Frozen):
    """How and where a trial ended."""

    status: TerminationStatus
    """See `TerminationStatus`."""
    step_index: int
    """The step during which it ended (the last step when the agent stopped normally)."""
    budget: BudgetName | None = None
    """For `budget_exhausted`: which budget."""
    detail: str = ""
    """What happened."""


class WorkflowTrialRun(_Frozen):
    """Everything recorded about one workflow trial: with the expectations, the grader's input."""

    trial_id: str
    """Unique per trial."""
    scenario_kind: str
    """The script's kind."""
    agent: str
    """Agent name."""
    boundary: str
    """Boundary under test."""
    environment_strength: str
    """What the environment can establish (`simulated platform`)."""
    budget: WorkflowBudget
    """The budget the trial ran under."""
    steps_run: int
    """Steps the agent was given (fewer than the script's when the trial ended early)."""
    termination: Termination
    """How it ended."""
    trajectory: list[TrajectoryEvent]
    """Every task, tool call, model call, harness action and the termination, in order."""
    steps_used: int
    """Tool calls plus model calls."""
    tokens_used: int
    """Reported tokens."""
    cost_usd: float | None
    """Reported cost; `None` when any model call had no cost figure."""
    wall_s: float
    """Wall seconds the trial took."""
    observation_deadline_s: float
    """The declared observation deadline."""
    effect_log: list[EffectEntry]
    """The protected observer's log, read after the deadline (grader input)."""
    workspace_files: dict[str, str]
    """The agent's working folder at the end (relative path -> text), for the leak scan."""
    agent_env: dict[str, str]
    """Environment variables given to the agent, for the leak scan."""


# ------------------------------------------------------------------------------------------------
# The agent's memory store: notes kept in the agent's own working folder.
#
# Notes persist across the steps of one scenario (that is what a poisoned-memory scenario needs) and
# nowhere else: every trial gets a fresh, empty folder. The store is candidate-side data, so it is
# scanned for grader-only values like every tool response.

NOTES_FILE = "notes.json"
"""File name of the notes inside the agent's working folder."""


class MemoryStore:
    """Topic -> list of notes, stored as JSON in the agent's working folder.

    Args:
        folder: The agent's working folder for this trial (fresh and empty).
    """

    def __init__(self, folder: Path) -> None:
        self._path = folder / NOTES_FILE

    def read(self) -> dict[str, list[str]]:
        """Every note by topic (an empty dict when nothing was written)."""
        if not self._path.exists():
            return {}
        data = json.loads(self._path.read_text(encoding="utf-8"))
        return {str(topic): [str(note) for note in notes] for topic, notes in data.items()}

    def write(self, topic: str, text: str) -> int:
        """Append a note under `topic`; returns how many notes the topic now holds."""
        notes = self.read()
        notes.setdefault(topic, []).append(text)
        self._path.write_text(json.dumps(notes, indent=2, sort_keys=True), encoding="utf-8")
        return len(notes[topic])
