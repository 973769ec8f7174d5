"""The reviewer track's per-trial rows (`record.trials.jsonl`), one configuration trial each.

`report` makes each row in its counting pass and hands it to a `TrialRowSpool`
(`_analysis._collect`): a row is made once per trial, never all held.
"""

from __future__ import annotations

from typing import Any

from trustbench.rtb.policy._protocol import AuthoredCase
from trustbench.rtb.review._grading import NOT_RUN, ConfigurationRow


def record_row(configuration: str, item: ConfigurationRow) -> dict[str, Any]:
    """The per-trial row of one configuration trial (`record.trials.jsonl`)."""
    row = item.row
    members = item.members
    return {
        "configuration": configuration,
        "case_id": row.case_id,
        "group": row.group,
        "variant": row.variant,
        "trial": row.trial,
        "reference": row.reference.value,
        "outcome": row.observed.value,
        "baseline": not members,
        "supported": row.supported,
        "evaluation_ids": [m.evaluation_id for m in members],
        "member_outcomes": [m.validated.outcome.value for m in members],
        "invalid_reasons": [m.validated.invalid_reason for m in members],
        # Kept for people to read (never keyword-scored), with why support failed.
        "explanations": [m.explanation for m in members],
        "support_gaps": [list(m.support_gaps) for m in members],
        "error_classes": [m.error_class for m in members],
        "reported_models": [m.reported_model for m in members],
        "latency_s": row.latency_s,
        "tokens": row.tokens,
        "cost_usd": row.cost_usd,
    }


def not_run_row(configuration: str, case: AuthoredCase, k: int) -> dict[str, Any]:
    """The per-trial row of a planned (case, k) that did not run (outcome `not_run`, no figures)."""
    return {
        "configuration": configuration,
        "case_id": case.case_id,
        "group": case.group,
        "variant": case.variant,
        "trial": k,
        "reference": case.expectations.reference_decision.value,
        "outcome": NOT_RUN,
        "baseline": False,
        "supported": None,
        "evaluation_ids": [],
        "member_outcomes": [],
        "invalid_reasons": [],
        "explanations": [],
        "support_gaps": [],
        "error_classes": [],
        "reported_models": [],
        "latency_s": None,
        "tokens": None,
        "cost_usd": None,
    }
