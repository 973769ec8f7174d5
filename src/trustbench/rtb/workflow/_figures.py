"""Report figures from workflow counts, with the intervals `trustbench.core.stats` provides.

Trial-level rates get exact Clopper-Pearson (and Wilson) intervals, which assume independent trials
with a common rate; scenarios derived from the same case or group are not independent, so the lead
should add clustered intervals (`clustered_figure`) where group labels are at hand. Evidence
completeness gets no interval: its elements are not independent units.
"""

from __future__ import annotations

from trustbench.core.figures import FigureUnit
from trustbench.core.stats import Figure, bounded_rate, rate_figure
from trustbench.rtb.workflow._counts import MetricCount, WorkflowCounts


def workflow_figures(counts: WorkflowCounts, *, confidence: float = 0.95) -> list[Figure]:
    """Figures for one agent x boundary configuration.

    Args:
        counts: The configuration's counts.
        confidence: Confidence level of every interval.

    Returns:
        Prohibited-effect lower and upper bounds, permitted completion, unsupported completion
        claims (n/a without claims), evidence completeness, completed-and-compliant,
        all-pass-in-k, any-violation-in-k and pass^k for each available k.
    """
    c = counts
    prefix = "workflow"
    bounds = bounded_rate(
        c.prohibited_effect.numerator,
        c.prohibited_unresolved,
        c.prohibited_effect.denominator,
        name=f"{prefix}_prohibited_effect_rate",
        description=f"{c.prohibited_effect.description} ({c.agent} with {c.boundary}; "
        f"{', '.join(c.environment_strengths)})",
        confidence=confidence,
        deadline=", ".join(f"{d:g} simulated s after trial start" for d in c.observation_deadline_s)
        or None,
    )
    figures = [bounds.lower, bounds.upper]
    rates: list[tuple[str, MetricCount, FigureUnit]] = [
        ("permitted_completion_rate", c.permitted_completion, "trial"),
        ("unsupported_completion_claim_rate", c.unsupported_claims, "trial"),
        ("completed_and_compliant_rate", c.completed_and_compliant, "trial"),
        ("all_pass_in_k_rate", c.all_pass_in_k, "case"),
        ("any_violation_in_k_rate", c.any_violation_in_k, "case"),
    ]
    for name, metric, unit in rates:
        figures.append(
            rate_figure(
                f"{prefix}_{name}",
                metric.numerator,
                metric.denominator,
                unit=unit,
                confidence=confidence,
                one_sided_upper=True,
                description=f"{metric.description} (unit: {metric.unit})",
                reason_if_empty=f"no {metric.unit}s to evaluate ({metric.description})",
            )
        )
    e = c.evidence_completeness
    figures.append(
        rate_figure(
            f"{prefix}_evidence_completeness",
            e.numerator,
            e.denominator,
            methods=(),
            description=f"{e.description}; no interval: elements are not independent units",
        )
    )
    n = c.all_pass_in_k.denominator
    for k, value in sorted(c.pass_hat_k.items()):
        figures.append(
            Figure(
                name=f"{prefix}_pass_hat_{k}",
                kind="mean",
                numerator=value * n,
                denominator=n,
                estimate=value,
                unit="case",
                unit_count=n,
                description=f"unbiased pass^{k} averaged over {n} scenarios (C(c,k)/C(n,k) per "
                "scenario); interval left to a clustered method",
            )
        )
    return figures
