"""The audit that learns, on one corpus: learned attackers and the artifact scan, with their tables.

`trustbench rtb audit` runs these beside the fixed shortcut rules (`_shortcuts.py`). Both read the
corpus's exported candidate inputs, produced by its policy exactly as a real export does, and use
the answer key only to fit and to score. A corpus fails when any attacker scores above chance +
margin held out, or any token class carries label information (see `_learned.py`,
`_artifacts.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.markup import escape
from rich.table import Table

from trustbench.rtb.corpus._export import new_evaluation_id, to_candidate_input
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.review._artifacts import ArtifactReport, artifact_scan
from trustbench.rtb.review._ceiling import percent, verdict_cell
from trustbench.rtb.review._learned import DEFAULT_MARGIN, LearnedReport, learned_audit

_SHOWN_CLASSES = 8
"""Token classes shown in the artifact table (every class above the threshold is shown)."""


@dataclass(frozen=True)
class LearningAudit:
    """Both learning checks on one corpus."""

    learned: LearnedReport
    """Every learned attacker's held-out accuracy."""
    artifacts: ArtifactReport
    """Every token class's label information against the permutation threshold."""

    @property
    def ok(self) -> bool:
        """True when no attacker saturates the corpus and no token class carries the label."""
        return self.learned.ok and self.artifacts.ok


def run_learning_audit(
    corpus: Corpus, *, margin: float = DEFAULT_MARGIN, seed: int = 0
) -> LearningAudit:
    """Export every case as a candidate would see it, then attack the export.

    Evaluation ids are fresh and never read by a feature, so the result does not depend on them.
    """
    documents = [
        to_candidate_input(case, new_evaluation_id()).model_dump(mode="json")
        for case in corpus.cases
    ]
    labels = [case.expectations.reference_decision.value for case in corpus.cases]
    groups = [case.group for case in corpus.cases]
    return LearningAudit(
        learned=learned_audit(documents, labels, groups, margin=margin, seed=seed),
        artifacts=artifact_scan(documents, labels, groups, seed=seed),
    )


def learned_table(report: LearnedReport) -> Table:
    """Each learned attacker's held-out accuracy against chance + margin."""
    table = Table(
        title="Learned surface attackers (candidate-visible input only; leave one domain group "
        f"out, seed {report.seed})",
        caption=f"chance = majority-class share {percent(report.chance)}; ceiling = chance + "
        f"{100 * report.margin:g} points = {percent(report.ceiling)}; {report.groups} groups",
    )
    for column in ("attacker", "held-out accuracy", "result", "detail"):
        table.add_column(column, overflow="fold")
    for attacker in report.attackers:
        above = attacker.attacker in report.saturating
        table.add_row(
            attacker.attacker,
            percent(attacker.accuracy),
            verdict_cell(attacker.accuracy, above, "SATURATES"),
            f"{attacker.detail}. {attacker.description}",
        )
    return table


def artifact_table(report: ArtifactReport) -> Table:
    """The most label-informative token classes against the permutation threshold."""
    threshold = "not run" if report.threshold_bits is None else f"{report.threshold_bits:.4f} bits"
    table = Table(
        title="Artifact scan: label information per candidate-visible token class",
        caption=f"threshold = {1 - report.alpha:g} quantile of the largest token MI over "
        f"{report.permutations} within-group label permutations (seed {report.seed}): "
        f"{threshold}; {len(report.classes)} classes tested",
    )
    for column in ("token class", "MI (bits)", "result", "top token (inputs)"):
        table.add_column(column, overflow="fold")
    carrying = set(report.carrying)
    shown = [c for c in report.classes if c.token_class in carrying]
    shown += [c for c in report.classes if c.token_class not in carrying][:_SHOWN_CLASSES]
    for score in shown:
        result = (
            "[bold red]CARRIES LABEL[/]" if score.token_class in carrying else "[green]below[/]"
        )
        table.add_row(  # escaped: a path's `[approval]` is data, not rich markup
            escape(score.token_class),
            f"{score.mutual_information_bits:.4f}",
            result,
            escape(f"{score.top_token} ({score.documents})"),
        )
    return table


def verdict_lines(audit: LearningAudit) -> list[str]:
    """One line per check: what saturates the corpus, or that nothing does."""
    learned, artifacts = audit.learned, audit.artifacts
    lines = []
    if learned.saturating:
        named = ", ".join(
            f"{a.attacker} {percent(a.accuracy)}"
            for a in learned.attackers
            if a.attacker in learned.saturating
        )
        lines.append(
            f"corpus saturated by learned attackers: {named} held out, above the ceiling "
            f"{percent(learned.ceiling)}"
        )
    elif not learned.ok:
        lines.append("learned attackers not run: saturation by a learner not excluded")
    else:
        lines.append(
            f"no learned attacker above the ceiling {percent(learned.ceiling)} "
            f"(all {len(learned.attackers)} ran)"
        )
    if artifacts.carrying:
        lines.append(
            f"label artifacts: {len(artifacts.carrying)} token class(es) above "
            f"{artifacts.threshold_bits:.4f} bits: " + ", ".join(artifacts.carrying[:10])
        )
    elif not artifacts.ok:
        lines.append("artifact scan not run: no token could be tested")
    else:
        lines.append(
            f"no token class carries label information (threshold "
            f"{artifacts.threshold_bits:.4f} bits)"
        )
    return lines


__all__ = [
    "LearningAudit",
    "artifact_table",
    "learned_table",
    "run_learning_audit",
    "verdict_lines",
]
