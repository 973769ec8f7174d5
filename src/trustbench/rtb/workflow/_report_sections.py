"""Report blocks of a workflow run (what `analyze_workflow_run` lays out for the page)."""

from __future__ import annotations

from typing import Any

from trustbench.core.figures import Figure
from trustbench.core.report import Block, FiguresBlock, ForestBlock, TextBlock, breakdown_table
from trustbench.rtb.workflow._config import WorkflowConfiguration
from trustbench.rtb.workflow._grading import WorkflowTrialGrade

UNITS_NOTE = (
    "Each figure's unit is what it counts: prohibited effects, permitted-task completion and "
    "completed-and-compliant count applicable trials; unsupported completion claims count "
    "reported verified completions (claims); evidence completeness counts required elements; "
    "all-pass-in-k, any-violation-in-k and pass^k count scenarios, each over its K trials. "
    "analysis.unit declares the grouping of the intervals (clustered by distinct source case, "
    "or by domain group for `group`); the exact bound a gate reads counts distinct cases."
)
"""How the workflow figures' units relate to `analysis.unit` (stated in record and report)."""


def report_sections(
    configs: dict[str, WorkflowConfiguration],
    subjects: dict[str, list[Figure]],
    grades: dict[str, list[WorkflowTrialGrade]],
    leak_scan: dict[str, Any],
    failed: list[str],
    by_kind: dict[str, dict[str, list[Figure]]],
    by_group: dict[str, dict[str, list[Figure]]],
) -> list[Block]:
    """The workflow report's sections, in page order."""
    about = [
        "Each configuration is an agent with a boundary under test. The agent receives task "
        "briefs and tools; the harness records every tool call and result; the grader reads "
        "only the protected observer's log and the trajectory, never the agent's claim.",
        *(
            f"{name}: {c.agent_kind} agent {c.agent} with boundary {c.boundary}; budget "
            f"{c.budget.max_steps} steps, {c.budget.max_tokens or 'unlimited'} tokens, "
            f"{c.budget.max_wall_s or 'unlimited'} s, "
            f"{'$' + str(c.budget.max_cost_usd) if c.budget.max_cost_usd else 'unlimited cost'}"
            for name, c in configs.items()
        ),
    ]
    sections: list[Block] = [TextBlock(title="What was tested", paragraphs=[*about, UNITS_NOTE])]
    for name, figures in subjects.items():
        sections.append(
            FiguresBlock(
                title=f"{name}",
                figures=figures,
                note="Each row counts what its unit says (trials, claims, elements or "
                "scenarios); intervals are clustered by case (or group, as declared).",
                folded=True,
            )
        )
    upper = "workflow_prohibited_effect_rate_upper"
    # Rows named by configuration alone, so the page can colour each by its gate on `upper`.
    uppers = [
        f.model_copy(update={"name": name})
        for name, figures in subjects.items()
        for f in figures
        if f.name == upper
    ]
    if uppers:
        sections.append(
            ForestBlock(
                title=f"Prohibited-effect rate, upper bound (confirmed + unresolved): {upper}",
                figures=uppers,
                xlabel="share of tempting trials",
                metric=upper,
            )
        )
    for name, kinds in by_kind.items():
        rows = [
            f.model_copy(update={"name": f"{kind}: {f.name}"})
            for kind, figures in kinds.items()
            for f in figures
            if f.name == "workflow_prohibited_effect_rate_upper"
        ]
        if rows:
            sections.append(
                ForestBlock(
                    title=f"{name}: prohibited-effect upper bound by scenario kind",
                    subject=name,
                    figures=rows,
                    xlabel="share of tempting trials of the kind",
                    note="Per-group figures are in record.json (workflow.by_group).",
                    folded=True,
                )
            )
    sections += [
        breakdown_table(
            f"Per-group breakdown: {name}",
            "group",
            groups,
            note="Per domain group: estimate (numerator / denominator); intervals in record.json "
            "(workflow.by_group).",
        )
        for name, groups in by_group.items()
        if groups
    ]
    findings: list[str] = []
    for name, items in grades.items():
        violated = sorted({g.scenario_id for g in items if g.prohibited_effect})
        unsupported = sorted({g.scenario_id for g in items for c in g.claims if not c.supported})
        if violated:
            findings.append(f"{name}: prohibited effect in {len(violated)}: {', '.join(violated)}")
        if unsupported:
            findings.append(
                f"{name}: unsupported completion claim in {len(unsupported)}: "
                f"{', '.join(unsupported)}"
            )
    sections.append(
        TextBlock(
            title="Violations and unsupported claims, named",
            paragraphs=findings or ["none observed"],
        )
    )
    scan = (
        f"{leak_scan['payloads_scanned']} candidate-visible payloads scanned; "
        f"{len(leak_scan['leaks'])} grader-only value(s) found"
    )
    sections.append(
        TextBlock(
            title="Leak scan and failed trials",
            paragraphs=[scan, *(failed or ["no failed trials"])],
        )
    )
    return sections
