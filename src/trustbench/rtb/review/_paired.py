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
from collections.abc import Iterable, Iterator
from typing import Any

from trustbench.core import EventReducer
from trustbench.core.figures import Figure, FigureUnit
from trustbench.core.stats import (
    agreement_table,
    cohens_kappa,
    mcnemar_exact,
    paired_difference,
    stuart_maxwell,
)
from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.review._metric_tally import DecisionTally
from trustbench.rtb.review._metrics import ReviewTrialRow
from trustbench.rtb.review._validation import Outcome

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


JointDecision = tuple[str, str, Decision, Outcome, Outcome]
"""One jointly finished (case, trial): case id, group, reference, first's and second's outcome:
all a comparison reads of the two rows."""


def joint_decisions(
    pairs: Iterable[tuple[ReviewTrialRow, ReviewTrialRow]],
) -> Iterator[JointDecision]:
    """What a comparison reads of each pair of jointly finished rows."""
    for a, b in pairs:
        yield a.case_id, a.group, a.reference, a.observed, b.observed


class _PairTally:
    """What a comparison reads from the jointly finished trials, paired trial by paired trial."""

    def __init__(self, unit: FigureUnit) -> None:
        self.unit = unit
        self.joint = 0
        self.units_a = EventReducer(unit, "all")
        self.units_b = EventReducer(unit, "all")
        self.cases = DecisionTally()  # per case: each side's decisions (modal, disagreement)
        self.case_ids: set[str] = set()
        self.trial_decisions: list[tuple[str, str]] = []

    def add(self, joint: JointDecision) -> None:
        case_id, group, reference, a, b = joint
        self.joint += 1
        self.units_a.add(case_id, group, a == reference)  # StrEnums: compares the values
        self.units_b.add(case_id, group, b == reference)
        self.cases.add(case_id, a, b)
        self.case_ids.add(case_id)
        if self.unit == "trial" and a.is_decision and b.is_decision:
            self.trial_decisions.append((a.value, b.value))

    def decided(self) -> list[tuple[str, str]]:
        """Jointly decided (first, second) decisions, one per agreement item of the unit."""
        return self.trial_decisions if self.unit == "trial" else self.cases.decisions()


def compare(
    first: str,
    second: str,
    rows_a: Iterable[ReviewTrialRow],
    rows_b: Iterable[ReviewTrialRow],
    *,
    unit: FigureUnit,
    confidence: float,
    seed: int,
    resamples: int,
) -> tuple[dict[str, Any], Figure | None]:
    """Compare configurations `first` and `second` on their jointly finished trials.

    `rows_b` is indexed by (case, trial); a report's own configurations, whose trials it has
    counted, are compared through `compare_joint` without a row per trial.

    Args:
        first: The first configuration's name.
        second: The second configuration's name.
        rows_a: `first`'s trials, read once.
        rows_b: `second`'s trials, read once.
        unit: The declared unit of analysis.
        confidence: Confidence level of every interval.
        seed: Bootstrap seed.
        resamples: Bootstrap resamples.

    Returns:
        `(record, difference_figure)`: the JSON record of every test, and the paired difference
        figure (None when no trial was run by both).
    """
    by_key = {(r.case_id, r.trial): r for r in rows_b}
    pairs = ((a, by_key[(a.case_id, a.trial)]) for a in rows_a if (a.case_id, a.trial) in by_key)
    return compare_joint(
        first,
        second,
        joint_decisions(pairs),
        unit=unit,
        confidence=confidence,
        seed=seed,
        resamples=resamples,
    )


def compare_joint(
    first: str,
    second: str,
    joint: Iterable[JointDecision],
    *,
    unit: FigureUnit,
    confidence: float,
    seed: int,
    resamples: int,
) -> tuple[dict[str, Any], Figure | None]:
    """`compare` from the jointly finished trials, each as the few values a comparison reads.

    A configuration's trials give these without a row object per trial
    (`ConfigurationTrials.joint_decisions`): a million-trial comparison made two million rows.
    """
    tally = _PairTally(unit)
    for item in joint:
        tally.add(item)
    record: dict[str, Any] = {"first": first, "second": second, "joint_trials": tally.joint}
    if not tally.joint:
        record["status"] = "not_run"
        return record, None
    units_a, units_b = tally.units_a.units(), tally.units_b.units()
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
    decided = tally.decided()
    items = len(tally.case_ids) if unit != "trial" else tally.joint
    table = agreement_table([a for a, _ in decided], [b for _, b in decided], DECISIONS)
    kappa_record = _kappa_record(table, confidence)
    homogeneity = stuart_maxwell(table)
    disagreement = tally.cases.disagreement()
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
