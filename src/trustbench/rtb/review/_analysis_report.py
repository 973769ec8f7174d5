"""Report blocks of the reviewer track's analysis (what `analyze_review` gathers, laid out)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from trustbench.core import Evaluability
from trustbench.core.figures import Figure
from trustbench.core.report import Block, FiguresBlock, ForestBlock, TextBlock, TrialRowSpool
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.review._chain import ConfigurationKind, ReviewConfiguration
from trustbench.rtb.review._figures import headline
from trustbench.rtb.review._grading import ConfigurationRow
from trustbench.rtb.review._paired import summary_line
from trustbench.rtb.review._rule_breakdown import rule_breakdown_block
from trustbench.rtb.review._sections import Drilldown, breakdown_block, saturation_block

Entry = tuple[ReviewConfiguration, list[str], Iterable[ConfigurationRow], list[Any], Any]
"""(configuration, member names, graded rows, trials not run, candidate records)."""


class RunFacts(Protocol):
    """The run-wide facts the blocks print."""

    @property
    def corpus(self) -> Corpus:
        """The corpus the run read."""
        ...

    @property
    def unit(self) -> Any:
        """The declared `analysis.unit` (the grouping of the intervals)."""
        ...

    @property
    def k(self) -> int:
        """Trials per case."""
        ...


@dataclass
class Collected:
    """What the per-configuration step gathers, in report order."""

    all_rows: dict[str, Iterable[ConfigurationRow]] = field(default_factory=dict)
    subjects: dict[str, list[Figure]] = field(default_factory=dict)
    paired_figures: dict[str, list[Figure]] = field(default_factory=dict)
    baseline_figures: list[Figure] = field(default_factory=list)
    trial_rows: TrialRowSpool = field(default_factory=lambda: TrialRowSpool("review"))
    drilldown: Drilldown = field(default_factory=Drilldown)
    """The case drill-down, fed in the counting pass."""
    """Every configuration's per-trial rows, encoded in the counting pass."""
    config_records: dict[str, Any] = field(default_factory=dict)
    breakdowns: dict[str, Any] = field(default_factory=dict)
    confusions: list[Block] = field(default_factory=list)
    chain_blocks: list[Block] = field(default_factory=list)
    chain_records: dict[str, Any] = field(default_factory=dict)
    operating: list[str] = field(default_factory=list)
    evaluability: dict[str, Evaluability] = field(default_factory=dict)
    not_evaluable: dict[str, str] = field(default_factory=dict)
    instruments: set[str] = field(default_factory=set)
    paired_names: frozenset[str] = frozenset()
    rule_breakdown: dict[str, Any] = field(default_factory=dict)

    @property
    def every(self) -> dict[str, list[Figure]]:
        """Figures of every configuration, the baseline first."""
        return {"unchecked": self.baseline_figures, **self.subjects, **self.paired_figures}


def what_was_run(run: RunFacts, entries: list[Entry]) -> TextBlock:
    """What ran, how every rate is counted, and each configuration's members."""
    return TextBlock(
        title="What was run",
        paragraphs=[
            f"{len(run.corpus.cases)} cases of corpus {run.corpus.version}, {run.k} trial(s) per "
            f"case and candidate; declared grouping (analysis.unit): {run.unit}. Every rate is "
            "per evaluated trial, as the spec defines it (false approvals over evaluated trials "
            "of deny-reference cases, ...); repeated trials never multiply the case count in an "
            "interval: cluster-robust t on G-1 df and a seeded cluster bootstrap over cases (over "
            "domain groups when the unit is group), and an exact Clopper-Pearson bound (Wilson "
            "beside it) on distinct cases, a case counting when any of its K trials had an error "
            "event: the conservative bound the gates read.",
            *[
                f"{c.name} ({c.kind.value}): members "
                f"{', '.join(members) if members else 'none (every proposal proceeds)'}; "
                f"provider relation: {c.provider_relation.value} (a label, not a finding)."
                for c, members, *_ in entries
            ],
        ],
    )


def failed_block(out: Collected) -> TextBlock:
    """Failed trials per configuration, by error class."""
    return TextBlock(
        title="Failed trials by error class",
        paragraphs=[
            f"{name}: "
            + (
                ", ".join(f"{cls} {n}" for cls, n in record["error_classes"].items())
                or "no failed trial"
            )
            for name, record in out.config_records.items()
            if record["kind"] != ConfigurationKind.UNCHECKED  # the baseline runs no trial
        ],
    )


def forests(run: RunFacts, out: Collected) -> list[Block]:
    """One forest plot per headline rate, rows by configuration, gates drawn."""
    every = out.every
    return [
        ForestBlock(
            title=f"{metric} by configuration",
            figures=[
                next(f for f in figures if f.name == metric).model_copy(update={"name": name})
                for name, figures in every.items()
            ],
            xlabel=metric,
            metric=metric,
            sidedness="upper",
            note=f"Per evaluated trial; bar: the one-sided exact upper bound on distinct cases "
            f"(grouping {run.unit}). Not-run configurations stay as empty rows. Rows are "
            "coloured by the configuration's gate on this rate (green passed, red failed, "
            "amber not evaluable); the dashed red line is the gate threshold.",
        )
        for metric in headline()
    ]


def sections(
    run: RunFacts,
    out: Collected,
    entries: list[Entry],
    comparisons: tuple[list[dict[str, Any]], list[Figure]],
    human_blocks: list[Block],
    saturation: Any,
) -> list[Block]:
    """Every section of the reviewer report, in page order."""
    every = out.every
    paired_records, differences = comparisons
    return [
        what_was_run(run, entries),
        saturation_block(saturation),
        *human_blocks,
        failed_block(out),
        *forests(run, out),
        *[
            FiguresBlock(title=f"Figures: {name}", figures=figures, folded=True)
            for name, figures in every.items()
        ],
        *out.confusions,
        *[
            breakdown_block(name, by, out.breakdowns[name][by])
            for by in ("variant", "group")
            for name in every
            if out.breakdowns[name][by]
        ],
        *([rule_breakdown_block(out.rule_breakdown)] if out.rule_breakdown else []),
        out.drilldown.block(),
        FiguresBlock(
            title="Paired comparisons: difference in correct decisions",
            figures=differences,
            note="Same cases and trials on both sides; unit as declared.",
            folded=True,
        ),
        TextBlock(
            title="Paired tests",
            paragraphs=[summary_line(r) for r in paired_records],
            folded=True,
        ),
        *out.chain_blocks,
        TextBlock(
            title="Latency, tokens, cost, holds", paragraphs=out.operating or ["No trial ran."]
        ),
    ]
