"""Paired comparison of two reviewer configurations on the same cases and trials.

For every pair (A, B), over the (case, k) trials both finished:

- exact McNemar on unit outcomes "decision equals the reference" (the unit and the `all`
  reduction of `analysis.unit`, so K trials of a case are one case);
- the paired difference of those unit outcomes, mean(A - B), with a cluster-robust t interval on
  G - 1 df, the sign-flip interval and the seeded cluster bootstrap over domain groups;
- Cohen's kappa and the Stuart-Maxwell test on the 3x3 permit/deny/hold table of jointly
  decided *units*: with `analysis.unit` `case` or `group`, one decision per case and side (the
  modal decision of its decided trials), so K trials of a case are not K items (K = 2 would
  double the chi-square). Cases stay the items under `group` (groups are clusters of cases,
  not items a reviewer decides). A unit with no decided trial on a side is left out and
  counted;
- beside exact McNemar (which treats units as independent), the cluster-aware sign-flip test
  over domain groups on the same unit outcomes; the report and any decision use the latter.
- reviewer disagreement: differing decisions / jointly evaluated cases (each side's modal
  decision per case, the same items as the agreement table under `case`). Disagreement says where
  to look; it does not say which reviewer is right.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

from trustbench.core.analysis import TrialEvent, reduce_events
from trustbench.core.figures import Figure, FigureUnit
from trustbench.core.stats import (
    agreement_table,
    cohens_kappa,
    mcnemar_exact,
    paired_difference,
    stuart_maxwell,
)
from trustbench.rtb.review._metrics import ReviewTrialRow, case_decisions, reviewer_disagreement

DECISIONS = ("permit", "deny", "hold")
"""Categories of the agreement table."""


def _kappa_record(table: Any, confidence: float) -> dict[str, Any]:
    """Cohen's kappa as JSON, with a non-finite standard error reported as null.

    Degenerate margins (e.g. one side always permits) make statsmodels' asymptotic variance
    NaN; the record says so instead of carrying NaN.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        record = cohens_kappa(table, confidence=confidence).model_dump(mode="json")
    se = record.get("standard_error")
    if se is not None and not math.isfinite(se):
        record["standard_error"] = None
        record["interval"] = None
        record["standard_error_note"] = (
            "asymptotic standard error not finite for these margins (a rater used one category)"
        )
    return record


def _unit_decisions(
    pairs: Sequence[tuple[ReviewTrialRow, ReviewTrialRow]], unit: FigureUnit
) -> list[tuple[str, str]]:
    """Jointly decided (first, second) decisions, one per agreement item of `unit`."""
    if unit == "trial":
        return [
            (a.observed.value, b.observed.value)
            for a, b in pairs
            if a.observed.is_decision and b.observed.is_decision
        ]
    return case_decisions((a.case_id, a.observed, b.observed) for a, b in pairs)


def _correct(row: ReviewTrialRow) -> bool:
    return row.observed.value == row.reference.value


def compare(
    first: str,
    second: str,
    rows_a: Sequence[ReviewTrialRow],
    rows_b: Sequence[ReviewTrialRow],
    *,
    unit: FigureUnit,
    confidence: float,
    seed: int,
    resamples: int,
) -> tuple[dict[str, Any], Figure | None]:
    """Compare configurations `first` and `second` on their jointly finished trials.

    Returns:
        `(record, difference_figure)`: the JSON record of every test, and the paired difference
        figure (None when no trial was run by both).
    """
    by_key_b = {(r.case_id, r.trial): r for r in rows_b}
    pairs = [
        (a, by_key_b[(a.case_id, a.trial)]) for a in rows_a if (a.case_id, a.trial) in by_key_b
    ]
    record: dict[str, Any] = {"first": first, "second": second, "joint_trials": len(pairs)}
    if not pairs:
        record["status"] = "not_run"
        return record, None
    units_a = reduce_events(
        [TrialEvent(a.case_id, a.group, _correct(a)) for a, _ in pairs], unit, "all"
    )
    units_b = reduce_events(
        [TrialEvent(b.case_id, b.group, _correct(b)) for _, b in pairs], unit, "all"
    )
    mcnemar = mcnemar_exact([hit for _, hit in units_a], [hit for _, hit in units_b])
    difference, sign_flip = paired_difference(
        f"correct_decision_rate_difference[{first} - {second}]",
        [float(hit) for _, hit in units_a],
        [float(hit) for _, hit in units_b],
        clusters=[cluster for cluster, _ in units_a],
        description=f"per {unit}: correct ({first}) - correct ({second}); correct = every trial "
        "reached the reference decision",
        cluster="domain_group",
        unit=unit,
        confidence=confidence,
        seed=seed,
        resamples=resamples,
    )
    decided = _unit_decisions(pairs, unit)
    items = len({a.case_id for a, _ in pairs}) if unit != "trial" else len(pairs)
    table = agreement_table([a for a, _ in decided], [b for _, b in decided], DECISIONS)
    kappa_record = _kappa_record(table, confidence)
    homogeneity = stuart_maxwell(table)
    disagreement = reviewer_disagreement((a.case_id, a.observed, b.observed) for a, b in pairs)
    record.update(
        {
            "status": "measured",
            "unit": unit,
            "mcnemar_correct": mcnemar.model_dump(mode="json"),
            "correct_difference": difference.model_dump(mode="json"),
            "sign_flip_test": sign_flip.model_dump(mode="json"),
            # Exact McNemar treats units as independent; cases share domain groups, so the
            # group sign-flip test is the one a decision (or a future paired gate) must read.
            "decision_test": "sign_flip_test",
            "decision_table": {
                "categories": list(DECISIONS),
                "rows": first,
                "columns": second,
                "counts": table.tolist(),
                "unit": "trial" if unit == "trial" else "case",
                "units_left_out_missing_or_invalid": items - len(decided),
            },
            "cohens_kappa": kappa_record,
            "stuart_maxwell": homogeneity.model_dump(mode="json"),
            "disagreement": disagreement.model_dump(mode="json"),
        }
    )
    return record, difference


def summary_line(record: dict[str, Any]) -> str:
    """One sentence per comparison for the report."""
    name = f"{record['first']} vs {record['second']}"
    if record["status"] != "measured":
        return f"{name}: not run (no trial finished under both)."
    unusable = record.get("not_evaluable")
    if unusable:
        return (
            f"{name}: not evaluable ({'; '.join(f'{n}: {why}' for n, why in unusable.items())}): "
            "its tests would compare missing or invalid replies, not decisions."
        )
    mc = record["mcnemar_correct"]
    kappa = record["cohens_kappa"]
    sm = record["stuart_maxwell"]
    flip = record["sign_flip_test"]
    table_unit = record["decision_table"].get("unit", "trial")
    dis = record["disagreement"]
    kappa_text = (
        f"kappa {kappa['kappa']:.3f}"
        if kappa["kappa"] is not None
        else f"kappa not computable ({kappa['not_computable']})"
    )
    sm_text = (
        f"Stuart-Maxwell chi2 {sm['statistic']:.3f} (df {sm['df']}, p {sm['p_value']:.3g})"
        if sm["statistic"] is not None
        else f"Stuart-Maxwell not computable ({sm['not_computable']})"
    )
    dis_text = (
        f"disagreement {dis['numerator']}/{dis['denominator']} jointly evaluated cases"
        if dis["denominator"]
        else "disagreement n/a (no jointly evaluated case)"
    )
    return (
        f"{name} on {record['joint_trials']} joint trials: McNemar exact on correct "
        f"{record['unit']}s (only first {mc['first_only']}, only second "
        f"{mc['second_only']}) p = {mc['p_value']:.3g}, assumes independent units; "
        f"cluster-aware sign-flip over {flip['groups']} domain groups p = "
        f"{flip['p_value']:.3g} (the one to act on); {kappa_text} on "
        f"{sum(map(sum, record['decision_table']['counts']))} jointly decided {table_unit}s; "
        f"{sm_text}; "
        f"{dis_text}."
    )
