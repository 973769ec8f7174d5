"""RTB track 3, end-to-end workflow: agents act on the simulated platform through tools.

An agent receives task briefs and a `ToolBox` (read resources and approvals, request changes
through the boundary under test, resume checkpoints, edit labels, run the environment's verifier,
keep notes, report completion with cited evidence). Tool results are the only candidate-visible
data. Outcomes come from the protected observer: prohibited effects over the whole trajectory,
permitted-task completion within budget, unsupported completion claims, evidence completeness.

Typical use::

    scenarios = workflow_scenarios(cases)
    run = await run_workflow_trial(s.script, HonestAgent, boundary_factory("reference"))
    grade = grade_workflow_trial(s, run)
    evaluation = await evaluate_workflow(scenarios, HonestAgent, boundary_factory("reference"),
                                         trials=3)
    figures = workflow_figures(evaluation.grades)
"""

from __future__ import annotations

from trustbench.rtb.workflow._agent import (
    SCRIPTED_AGENTS,
    SYSTEM_PROMPT,
    AgentFactory,
    ChatFunction,
    ChatTurn,
    FalseClaimingAgent,
    HonestAgent,
    LLMAgent,
    MemoryPoisonedAgent,
    MetadataForgingAgent,
    RecklessAgent,
    ToolCallRequest,
    WorkflowAgent,
    openai_compatible_chat,
    run_workflow_trial,
    scripted_agent,
)
from trustbench.rtb.workflow._audit import (
    WorkflowAuditCheck,
    WorkflowAuditReport,
    arun_workflow_audit,
    run_workflow_audit,
)
from trustbench.rtb.workflow._grading import (
    ClaimGrade,
    MetricCount,
    StepGrade,
    WorkflowCounts,
    WorkflowEvaluation,
    WorkflowTrialGrade,
    evaluate_workflow,
    grade_workflow_trial,
    summarize_workflow,
    workflow_figures,
)
from trustbench.rtb.workflow._leaks import (
    Leak,
    candidate_visible,
    find_leaks,
    scan_trial,
    scenario_grader_values,
)
from trustbench.rtb.workflow._models import (
    ChangeSpec,
    MemoryStore,
    ModelUsage,
    ProposedChange,
    ScenarioExpectations,
    ScenarioScript,
    StepExpectation,
    StepScript,
    TaskBrief,
    Termination,
    TrajectoryEvent,
    WorkflowBudget,
    WorkflowScenario,
    WorkflowTrialRun,
)
from trustbench.rtb.workflow._scenarios import (
    DEFAULT_WORKFLOW_DEADLINE_S,
    WorkflowKind,
    direct_workflow_scenarios,
    stateful_workflow_scenarios,
    workflow_scenarios,
)
from trustbench.rtb.workflow._tools import BudgetExhausted, ToolBox, WorkflowTools, tool_schema

__all__ = [
    "DEFAULT_WORKFLOW_DEADLINE_S",
    "SCRIPTED_AGENTS",
    "SYSTEM_PROMPT",
    "AgentFactory",
    "BudgetExhausted",
    "ChangeSpec",
    "ChatFunction",
    "ChatTurn",
    "ClaimGrade",
    "FalseClaimingAgent",
    "HonestAgent",
    "LLMAgent",
    "Leak",
    "MemoryPoisonedAgent",
    "MemoryStore",
    "MetadataForgingAgent",
    "MetricCount",
    "ModelUsage",
    "ProposedChange",
    "RecklessAgent",
    "ScenarioExpectations",
    "ScenarioScript",
    "StepExpectation",
    "StepGrade",
    "StepScript",
    "TaskBrief",
    "Termination",
    "ToolBox",
    "ToolCallRequest",
    "TrajectoryEvent",
    "WorkflowAgent",
    "WorkflowAuditCheck",
    "WorkflowAuditReport",
    "WorkflowBudget",
    "WorkflowCounts",
    "WorkflowEvaluation",
    "WorkflowKind",
    "WorkflowScenario",
    "WorkflowTools",
    "WorkflowTrialGrade",
    "WorkflowTrialRun",
    "arun_workflow_audit",
    "candidate_visible",
    "direct_workflow_scenarios",
    "evaluate_workflow",
    "find_leaks",
    "grade_workflow_trial",
    "openai_compatible_chat",
    "run_workflow_audit",
    "run_workflow_trial",
    "scan_trial",
    "scenario_grader_values",
    "scripted_agent",
    "stateful_workflow_scenarios",
    "summarize_workflow",
    "tool_schema",
    "workflow_figures",
    "workflow_scenarios",
]
