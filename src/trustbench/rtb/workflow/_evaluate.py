"""Run and grade one agent x boundary configuration over scenarios, K independent trials each."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from trustbench.rtb.boundaries import BoundaryFactory
from trustbench.rtb.workflow._agent_protocol import AgentFactory
from trustbench.rtb.workflow._counts import WorkflowCounts, summarize_workflow
from trustbench.rtb.workflow._grading import WorkflowTrialGrade, grade_workflow_trial
from trustbench.rtb.workflow._models import WorkflowBudget, WorkflowScenario, WorkflowTrialRun
from trustbench.rtb.workflow._runner import run_workflow_trial


class WorkflowEvaluation(BaseModel):
    """Every run and grade of one configuration, and its counts."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

    runs: list[WorkflowTrialRun]
    """Every trial run, scenario by scenario, trial by trial (none dropped)."""
    grades: list[WorkflowTrialGrade]
    """The grade of each run, in the same order."""
    counts: WorkflowCounts
    """Summary counts."""
    trials_per_scenario: int = Field(ge=1)
    """K, the declared number of independent trials per scenario."""


async def evaluate_workflow(
    scenarios: Sequence[WorkflowScenario],
    agent_factory: AgentFactory,
    boundary_factory: BoundaryFactory,
    *,
    trials: int = 1,
    budget: WorkflowBudget | None = None,
) -> WorkflowEvaluation:
    """Run every scenario `trials` times with fresh state each time, and grade every run.

    Trials run one after another; a scheduler that interleaves configurations can call
    `run_workflow_trial` itself.

    Args:
        scenarios: Workflow scenarios.
        agent_factory: Builds a fresh agent per trial.
        boundary_factory: Builds the boundary under test.
        trials: K independent trials per scenario.
        budget: Per-trial budget.

    Returns:
        Runs, grades and counts.
    """
    if trials < 1:
        raise ValueError("trials must be at least 1")
    runs: list[WorkflowTrialRun] = []
    grades: list[WorkflowTrialGrade] = []
    for scenario in scenarios:
        for _ in range(trials):
            run = await run_workflow_trial(
                scenario.script, agent_factory, boundary_factory, budget=budget
            )
            runs.append(run)
            grades.append(grade_workflow_trial(scenario, run))
    return WorkflowEvaluation(
        runs=runs, grades=grades, counts=summarize_workflow(grades), trials_per_scenario=trials
    )
