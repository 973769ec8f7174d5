"""Report figures of a workflow configuration, each as the spec's metrics table defines it.

Every rate is declared once in `_rates.py` (the counts read the same declarations) and becomes a
`Figure` through `rtb._trial_rates.trial_rate_figure`: the estimate is per applicable item (a
trial, a reported completion claim, an evidence element, or a scenario for the in-K figures),
the intervals are clustered by the distinct source case (by domain group under
`analysis.unit = "group"`), since scenarios derived from one case and its K trials are not
independent, and the exact bound a gate reads counts distinct cases (any-in-case for an error
event, every-in-case for a success event). Prohibited effects come as a lower and an upper figure
on the same denominator, the unresolved trials between them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trustbench.core.figures import Figure
from trustbench.core.stats import clustered_figure, pass_hat_k
from trustbench.rtb._trial_rates import Grouping, cluster_name, trial_rate_figure
from trustbench.rtb.workflow._grading import WorkflowTrialGrade
from trustbench.rtb.workflow._rates import LOWER_BOUNDED as _LOWER
from trustbench.rtb.workflow._rates import RATES

if TYPE_CHECKING:
    from trustbench.core import Manifest

PREFIX = "workflow_"
"""Every workflow figure name starts with this."""

LOWER_BOUNDED = tuple(f"{PREFIX}{name}" for name in sorted(_LOWER))
"""Figures where more is better: a gate reads their one-sided lower bound ("at least x%")."""


def _context(grades: Sequence[WorkflowTrialGrade]) -> str:
    strengths = ", ".join(sorted({g.environment_strength for g in grades}))
    deadlines = ", ".join(
        f"{d:g} simulated s after trial start"
        for d in sorted({g.observation_deadline_s for g in grades})
    )
    configs = ", ".join(sorted({f"{g.agent} with {g.boundary}" for g in grades}))
    return f"{configs}; observation deadline {deadlines}; environment: {strengths}"


def _pass_hat_figures(
    grades: Sequence[WorkflowTrialGrade],
    groups: Mapping[str, str],
    grouping: Grouping,
    stats: dict[str, Any],
) -> list[Figure]:
    """Unbiased pass^k per scenario, averaged over scenarios, for each k every scenario ran."""
    by_scenario: dict[str, list[WorkflowTrialGrade]] = defaultdict(list)
    for grade in grades:
        by_scenario[grade.scenario_id].append(grade)
    k_max = min((len(v) for v in by_scenario.values()), default=0)
    cluster = cluster_name(grouping)
    labels = [
        groups.get(gs[0].scenario_id, gs[0].case_id) if grouping == "group" else gs[0].case_id
        for gs in by_scenario.values()
    ]
    figures = []
    for k in range(1, k_max + 1):
        values = [pass_hat_k(sum(g.passed for g in gs), len(gs), k) for gs in by_scenario.values()]
        figures.append(
            clustered_figure(
                f"{PREFIX}pass_hat_{k}",
                values,
                None,
                labels,
                description=f"unbiased pass^{k} averaged over {len(values)} scenarios "
                f"(C(c,{k})/C(n,{k}) per scenario); clustered by {cluster.replace('_', ' ')}",
                cluster=cluster,
                kind="mean",
                unit="scenario",
                **stats,
            )
        )
    return figures


def workflow_figures(
    grades: Sequence[WorkflowTrialGrade],
    groups: Mapping[str, str] | None = None,
    *,
    grouping: Grouping = "case",
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = 10_000,
    clustered: bool = True,
) -> list[Figure]:
    """Figures for one agent x boundary configuration, from its trial grades.

    Args:
        grades: Every trial grade of the configuration (none dropped).
        groups: Scenario id -> domain group (the cluster under `grouping = "group"`).
        grouping: The declared `analysis.unit` (what the intervals cluster by).
        confidence: Confidence level of every interval.
        seed: Bootstrap seed.
        resamples: Bootstrap resamples.
        clustered: Attach the clustered intervals (off for one-group breakdowns).

    Returns:
        Every declared rate (`_rates.RATES`: prohibited-effect lower and upper bounds, permitted
        completion, unsupported completion claims (n/a without claims), evidence completeness,
        completed-and-compliant, all-pass-in-k, any-violation-in-k) and pass^k for each k.
    """
    groups = groups or {}
    context = _context(grades)
    stats = {"confidence": confidence, "seed": seed, "resamples": resamples}
    figures = [
        trial_rate_figure(
            f"{PREFIX}{rate.name}",
            rate.items(grades, groups),
            description=f"{rate.description} ({context})",
            grouping=grouping,
            reduction=rate.reduction,
            unit=rate.unit,
            clustered=clustered,
            **stats,
        )
        for rate in RATES
    ]
    if clustered:
        figures += _pass_hat_figures(grades, groups, grouping, stats)
    return figures


def subject_figures(
    grades: Sequence[WorkflowTrialGrade], groups: dict[str, str], manifest: Manifest
) -> list[Figure]:
    """The figures of one configuration under the frozen analysis plan."""
    analysis = manifest.spec.analysis
    return workflow_figures(
        grades,
        groups,
        grouping=analysis.unit,
        confidence=analysis.confidence,
        seed=analysis.bootstrap_seed,
        resamples=analysis.bootstrap_resamples,
    )


def _breakdown(
    grades: Sequence[WorkflowTrialGrade], key: str, groups: dict[str, str], confidence: float
) -> dict[str, list[Figure]]:
    """The figures per scenario kind (`key="kind"`) or domain group (`key="group"`).

    Exact bounds only (no clustered interval): within one kind or group few cases remain.
    """
    buckets: dict[str, list[WorkflowTrialGrade]] = defaultdict(list)
    for grade in grades:
        label = grade.kind if key == "kind" else groups[grade.scenario_id]
        buckets[label].append(grade)
    return {
        label: workflow_figures(items, groups, confidence=confidence, clustered=False)
        for label, items in sorted(buckets.items())
    }


def _dump(breakdown: dict[str, list[Figure]]) -> dict[str, list[dict[str, Any]]]:
    return {label: [f.model_dump(mode="json") for f in figs] for label, figs in breakdown.items()}


def figure_names(trials_per_case: int) -> set[str]:
    """Every figure name a workflow configuration can have (what a gate may name)."""
    passes = tuple(f"pass_hat_{k}" for k in range(1, trials_per_case + 1))
    return {f"{PREFIX}{name}" for name in (*(r.name for r in RATES), *passes)}
