"""Report pieces of the reviewer track.

Confusion heatmaps, operating figures, chain conditionals, per-group / per-variant tables, the
case drill-down, and the qualifications every report carries. Presentation only: every figure
here is computed elsewhere.
"""

from __future__ import annotations

from typing import Any

from trustbench.core import withheld_figure
from trustbench.core.figures import Figure, rate_figure
from trustbench.core.report import (
    Block,
    ConfusionBlock,
    FiguresBlock,
    TableBlock,
    TextBlock,
    breakdown_table,
)
from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.review._grading import ConfigurationRow
from trustbench.rtb.review._metrics import Count, ReviewMetrics
from trustbench.rtb.review._shortcuts import (
    SaturationReport,
    chance_line,
    rule_line,
    verdict_line,
)
from trustbench.rtb.review._validation import Outcome

QUALIFICATIONS: list[str] = [
    "The reference decisions are authored expectations pending independent domain review; they "
    "are the benchmark's answer key, not ground truth.",
    "K trials of N cases are not N x K independent scenarios: intervals are computed on the "
    "declared unit, and the clustered intervals treat each domain group (six related variants "
    "of one template) as the independent unit.",
    "A simulated proposal review says nothing about execution: a reviewer's permit is advisory, "
    "and whether a prohibited effect would occur is measured by the control-path track.",
    "'Same provider' / 'cross provider' is a label of the recorded model identities, not a "
    "finding that the members fail independently.",
    "Reviewer disagreement shows where to investigate; it does not identify the correct reviewer.",
    "The unchecked baseline was not run: it is every proposal proceeding, shown for reference and "
    "not gated.",
    "A recorded seed does not make a hosted model reproduce the same outputs.",
]
"""What the reviewer-track results do not establish (shown at the end of every report)."""

_COLUMNS = [o.value for o in Outcome]
_ROWS = [d.value for d in Decision]


def confusion_block(name: str, metrics: ReviewMetrics) -> ConfusionBlock:
    """A configuration's confusion table in trials, missing and invalid as columns."""
    cells = metrics.overall.confusion.cells
    return ConfusionBlock(
        title=f"Confusion: {name}",
        rows=_ROWS,
        columns=_COLUMNS,
        counts=[[cells[Decision(r)][Outcome(c)] for c in _COLUMNS] for r in _ROWS],
        note="Trials (every trial of every case, missing and invalid replies as their own "
        "columns; neither is ever approval).",
        folded=True,
    )


def operating_line(name: str, metrics: ReviewMetrics) -> str:
    """Latency, tokens, cost and holds of one configuration, unknowns said as such."""
    overall = metrics.overall

    def seconds(value: float | None) -> str:
        return "not measured" if value is None else f"{value:.4g} s"

    tokens = "not reported" if overall.tokens_total is None else str(overall.tokens_total)
    cost = "unknown" if overall.cost_total_usd is None else f"${overall.cost_total_usd:.6f}"
    return (
        f"{name}: latency p50 {seconds(overall.latency_p50_s)}, p95 "
        f"{seconds(overall.latency_p95_s)} (nearest rank over {overall.latency_measured} trials, "
        f"retries included); tokens {tokens} ({overall.tokens_reported} trials reported); cost "
        f"{cost} ({overall.cost_reported} trials priced); holds {overall.holds.numerator}/"
        f"{overall.holds.denominator} trials."
    )


def _upper_rate(title: str, count: Count, note: str = "") -> Figure:
    """A chain rate with its one-sided upper bounds (a "no more than x%" gate reads those)."""
    return rate_figure(
        title,
        count.numerator,
        count.denominator,
        description=count.label + note,
        one_sided_upper=True,
    )


def chain_block(
    name: str, metrics: ReviewMetrics, members: list[str], not_evaluable: str | None = None
) -> tuple[Block, dict[str, Any]]:
    """The chain's conditional approval rates; withheld when the chain is not evaluable."""
    assert metrics.chain is not None
    deny = metrics.chain[Decision.DENY]
    misses = " (the second reviewer measured on the first reviewer's misses)"
    figures = [
        _upper_rate(f"P({members[0]} approves | prohibited)", deny.first_approves),
        _upper_rate(
            f"P({members[1]} approves | prohibited, {members[0]} approves)",
            deny.second_approves_given_first_approves,
            misses,
        ),
        _upper_rate("P(both approve | prohibited)", deny.both_approve),
        _upper_rate(f"P({members[1]} approves | prohibited)", deny.second_approves),
    ]
    product = deny.product_of_marginals
    figures = [withheld_figure(figure, name, not_evaluable) for figure in figures]
    note = (
        "Counted from the joint decisions of the same trials (unit: trial). Product of the "
        "marginals (what independent members would predict, not a measurement): "
        + (
            "withheld (not evaluable)"
            if not_evaluable is not None
            else "n/a"
            if product is None
            else f"{product:.4f}"
        )
        + "."
    )
    record = {
        "members": members,
        "conditionals": {
            ref.value: cond.model_dump(mode="json") for ref, cond in metrics.chain.items()
        },
        "member_disagreement": metrics.member_disagreement.model_dump(mode="json")
        if metrics.member_disagreement
        else None,
        "added_utility_loss": metrics.added_utility_loss.model_dump(mode="json")
        if metrics.added_utility_loss
        else None,
        "added_holds": metrics.added_holds.model_dump(mode="json") if metrics.added_holds else None,
        "not_evaluable": not_evaluable,
    }
    block = FiguresBlock(title=f"Chain conditionals: {name}", figures=figures, note=note)
    return block, record


_EXCERPT = 160
"""Characters of a reply shown in the drill-down (the whole reply is in the ledger)."""


def _reply_excerpt(item: ConfigurationRow) -> str:
    """The first member's explanation if the reply validated, else its raw text, truncated."""
    for member in item.members:
        # A reply whose finding parsed keeps its explanation, one that did not its raw text.
        text = member.raw_reply if member.raw_reply is not None else member.explanation
        if text:
            text = " ".join(text.split())
            return text if len(text) <= _EXCERPT else text[: _EXCERPT - 1] + "…"
        if member.error_class:
            return f"(no reply: {member.error_class})"
    return "(no reply)"


_LISTED = 20
"""Trials of a case listed one by one in the drill-down; past that their values are counted (at
10,000 trials a case the lists made the page 12 MB and its rendering most of `report`'s memory)."""


class Drilldown:
    """The drill-down's rows, one per (configuration, case), made as the counting pass goes.

    Fed every configuration trial once (`add`, in each configuration's order: case by case), it
    holds of the current case only its first trial and each trial's two labels; the unchecked
    baseline has no reviewer (no member trials) and no reply, so it is left out. Reading every
    configuration's trials again for the drill-down was a tenth of a large report's counting.
    """

    def __init__(self) -> None:
        self.rows: list[list[str]] = []
        self._key: tuple[str, str] | None = None
        self._first: ConfigurationRow | None = None
        self._marks: list[tuple[int, str, str]] = []

    def add(self, name: str, item: ConfigurationRow) -> None:
        """Take one trial of configuration `name` (trials without members are left out)."""
        if not item.members:
            return
        row = item.row
        key = (name, row.case_id)
        if key != self._key:
            self._close()
            self._key, self._first, self._marks = key, item, []
        elif self._first is not None and row.trial < self._first.row.trial:
            self._first = item
        self._marks.append((row.trial, row.observed.value, _supported_label(row.supported)))

    def block(self) -> TableBlock:
        """The drill-down table of every trial taken."""
        self._close()
        return _drilldown_table(self.rows)

    def _close(self) -> None:
        if self._key is not None and self._first is not None:
            self.rows.append(_drilldown_row(*self._key, self._first, self._marks))
        self._key, self._first, self._marks = None, None, []


def _supported_label(supported: bool | None) -> str:
    return "n/a" if supported is None else ("yes" if supported else "no")


def _per_trial(labels: list[str]) -> str:
    """The labels in trial order, or past `_LISTED` trials each label's count (first seen first)."""
    if len(labels) <= _LISTED:
        return ", ".join(labels)
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{label} x{count:,}" for label, count in counts.items())


def _drilldown_row(
    name: str, case_id: str, first: ConfigurationRow, marks: list[tuple[int, str, str]]
) -> list[str]:
    marks.sort(key=lambda mark: mark[0])
    head = first.row
    return [
        name,
        case_id,
        head.group,
        head.variant,
        head.reference.value,
        _per_trial([mark[1] for mark in marks]),
        _per_trial([mark[2] for mark in marks]),
        _reply_excerpt(first),
    ]


def _drilldown_table(rows: list[list[str]]) -> TableBlock:
    return TableBlock(
        title="Case drill-down",
        columns=[
            "configuration",
            "case id",
            "group",
            "variant",
            "reference",
            "decision per trial",
            "supported? per trial",
            f"reply excerpt (trial 1, first {_EXCERPT} characters)",
        ],
        rows=rows,
        filterable=True,
        scroll=True,
        note="Every graded case of every reviewer configuration (past "
        f"{_LISTED} trials a case, each value's count). 'missing' and 'invalid' are never "
        "approval; 'supported?' is whether the cited evidence supports the decision. Type "
        "in the filter to narrow the rows (e.g. a case id, 'always-permit', 'invalid').",
    )


def breakdown_block(name: str, by: str, figures: dict[str, list[dict[str, Any]]]) -> TableBlock:
    """A per-group or per-variant table of one configuration (figures as in `record.json`)."""
    return breakdown_table(
        f"Per-{by} breakdown: {name}",
        by,
        {value: [Figure.model_validate(f) for f in figs] for value, figs in figures.items()},
        note=f"Per {by}: estimate (numerator / denominator); exact intervals for each are in "
        "record.json (review.breakdowns). A single group or variant holds few cases.",
    )


def saturation_block(report: SaturationReport) -> TextBlock:
    """Corpus saturation: how well surface rules with no domain understanding reach the key."""
    return TextBlock(
        title="Corpus saturation (shortcut audit)",
        paragraphs=[
            verdict_line(report)[0].upper() + verdict_line(report)[1:] + ".",
            "Each rule sees only the candidate-visible input; its accuracy against the authored "
            "reference decisions is the corpus saturation. Fitted rules are cross-fitted on two "
            "halves of the domain groups (fit on one, scored on the other; mean of the halves).",
            chance_line(report),
            *[rule_line(report, rule) for rule in report.rules],
        ],
    )
