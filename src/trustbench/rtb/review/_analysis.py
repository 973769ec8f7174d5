"""Analysis of an `rtb/review` run: grade from the ledger, figures, comparisons, report blocks.

Reads only the frozen manifest, the ledger and the corpus the manifest pins (whose answer key is
read here, on the grader side, and nowhere at trial time). Configurations are built here: the
`unchecked` baseline, one `single` per candidate and the declared chains (see
`trustbench.rtb.review._options`). Gates are evaluated by core on `TrackAnalysis.subjects`:
every candidate and chain, but not the `unchecked` baseline, which is a reference point (what
happens without review), not a release candidate; its figures are still reported.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from trustbench.core import CandidateSpec, LedgerContents, Manifest, TrackAnalysis
from trustbench.core._analysis import Evaluability
from trustbench.core._evaluability import not_evaluable_reason, withheld_figure
from trustbench.core._manifest import CandidateRecord
from trustbench.core.figures import Figure
from trustbench.core.report import (
    Block,
    FiguresBlock,
    ForestBlock,
    TextBlock,
)
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.human._analysis import (
    human_report,
    is_human_run,
    paired_configurations,
)
from trustbench.rtb.review._chain import ConfigurationKind, ReviewConfiguration
from trustbench.rtb.review._figures import HEADLINE, configuration_figures
from trustbench.rtb.review._grading import (
    ConfigurationRow,
    configuration_evaluability,
    configuration_rows,
    error_class_counts,
    member_trials,
    record_rows,
)
from trustbench.rtb.review._invalid_reasons import invalid_reasons, reason_lines
from trustbench.rtb.review._metrics import ReviewMetrics, ReviewTrialRow, review_metrics
from trustbench.rtb.review._options import configurations, parse_options
from trustbench.rtb.review._paired import compare, summary_line
from trustbench.rtb.review._sections import (
    QUALIFICATIONS,
    breakdown_block,
    chain_block,
    confusion_block,
    drilldown_block,
    operating_line,
    saturation_block,
)
from trustbench.rtb.review._shortcuts import corpus_saturation
from trustbench.rtb.review.reviewers import SENTINEL_NAMES


def _breakdown(
    rows: list[ReviewTrialRow], key: str, *, unit: Any, k: int, confidence: float
) -> dict[str, list[Figure]]:
    values = sorted({getattr(r, key) for r in rows})
    return {
        value: configuration_figures(
            [r for r in rows if getattr(r, key) == value],
            unit=unit,
            k=k,
            confidence=confidence,
            seed=0,
            resamples=100,
            clustered=False,
            only=HEADLINE,
        )
        for value in values
    }


def _configuration_record(
    configuration: ReviewConfiguration,
    member_names: list[str],
    candidates: dict[str, CandidateRecord],
    rows: list[ConfigurationRow],
    metrics: ReviewMetrics | None,
    not_run: int,
) -> dict[str, Any]:
    reported = sorted(
        {m.reported_model for r in rows for m in r.members if m.reported_model is not None}
    )
    records = candidates
    return {
        "kind": configuration.kind.value,
        "members": [
            {
                "candidate": name,
                **identity.model_dump(mode="json"),
                "requested_model": records[name].requested_model,
                "endpoint": records[name].endpoint,
            }
            for name, identity in zip(member_names, configuration.members, strict=True)
        ],
        "provider_relation": configuration.provider_relation.value,
        "reported_models": reported,
        "trials": len(rows),
        "trials_not_run": not_run,
        "counts": metrics.model_dump(mode="json") if metrics else None,
    }


_IN_PROCESS_REVIEWER = "trustbench.rtb.review.reviewers:chat_responder"


def _is_sentinel(spec: CandidateSpec | None) -> bool:
    """A built-in sentinel reviewer: an instrument whose failures are its known signature."""
    return (
        spec is not None
        and spec.entry == _IN_PROCESS_REVIEWER
        and spec.settings.get("reviewer") in SENTINEL_NAMES
    )


RESPONSE_FIGURES = frozenset({"missing_rate", "invalid_rate"})
"""Figures that count the replies themselves: shown even for a not-evaluable configuration."""


def analyze_review(manifest: Manifest, ledger: LedgerContents, corpus: Corpus) -> TrackAnalysis:
    """Grade an `rtb/review` run and build its figures, comparisons and report sections."""
    spec = manifest.spec
    analysis = spec.analysis
    unit, k = analysis.unit, spec.trials_per_case
    stats = {
        "confidence": analysis.confidence,
        "seed": analysis.bootstrap_seed,
        "resamples": analysis.bootstrap_resamples,
    }
    graded = member_trials(manifest, ledger, corpus)
    invalid = invalid_reasons(graded.values())
    configs = configurations(spec)
    # A human run pairs its participants with AI configurations of earlier, verified runs; they
    # join the report as configurations of their own (figures, paired comparisons), not as gated
    # subjects of this run.
    paired, sources = (
        paired_configurations(manifest, corpus) if is_human_run(manifest) else ([], {})
    )
    own_records = {c.name: c for c in manifest.candidates}
    own_specs = {c.name: c for c in spec.candidates}
    entries = [
        (c, m, *configuration_rows(c, m, corpus, k, graded), own_records) for c, m in configs
    ] + [(p.configuration, p.members, p.rows, p.not_run, p.candidates) for p in paired]
    paired_names = {p.name for p in paired}
    paired_figures: dict[str, list[Figure]] = {}
    all_rows: dict[str, list[ConfigurationRow]] = {}
    subjects: dict[str, list[Figure]] = {}
    baseline_figures: list[Figure] = []
    trial_records: list[dict[str, Any]] = []
    config_records: dict[str, Any] = {}
    breakdowns: dict[str, Any] = {}
    confusions: list[Block] = []
    chain_blocks: list[Block] = []
    chain_records: dict[str, Any] = {}
    operating: list[str] = []
    evaluability: dict[str, Evaluability] = {}
    not_evaluable: dict[str, str] = {}
    instruments: set[str] = set()
    for configuration, members, rows, not_run, candidate_records in entries:
        all_rows[configuration.name] = rows
        plain = [r.row for r in rows]
        baseline = configuration.kind is ConfigurationKind.UNCHECKED
        figures = configuration_figures(plain, unit=unit, k=k, baseline=baseline, **stats)
        if baseline:
            baseline_figures = figures
        elif configuration.name in paired_names:
            paired_figures[configuration.name] = figures
        else:
            subjects[configuration.name] = figures
            evaluability[configuration.name] = configuration_evaluability(rows)
            if members and all(_is_sentinel(own_specs.get(m)) for m in members):
                instruments.add(configuration.name)
            why = not_evaluable_reason(
                evaluability[configuration.name], analysis.min_valid_response_rate
            )
            if why is not None and configuration.name not in instruments:
                not_evaluable[configuration.name] = why  # detail withheld like its figures
        metrics = review_metrics(plain) if plain else None
        trial_records += record_rows(configuration.name, rows, not_run, corpus)
        config_records[configuration.name] = _configuration_record(
            configuration, members, candidate_records, rows, metrics, len(not_run)
        )
        config_records[configuration.name]["error_classes"] = error_class_counts(rows)
        breakdowns[configuration.name] = {
            key: {
                value: [
                    withheld_figure(
                        f, configuration.name, not_evaluable.get(configuration.name)
                    ).model_dump(mode="json")
                    for f in figs
                ]
                for value, figs in _breakdown(
                    plain, key, unit=unit, k=k, confidence=analysis.confidence
                ).items()
            }
            for key in ("group", "variant")
        }
        if metrics is not None:
            confusions.append(confusion_block(configuration.name, metrics))
            if not baseline:
                operating.append(operating_line(configuration.name, metrics))
            if metrics.chain is not None:
                block, record = chain_block(
                    configuration.name, metrics, members, not_evaluable.get(configuration.name)
                )
                chain_blocks.append(block)
                chain_records[configuration.name] = record
    paired_records: list[dict[str, Any]] = []
    differences: list[Figure] = []
    names = [entry[0].name for entry in entries]
    for first, second in combinations(names, 2):
        record, difference = compare(
            first,
            second,
            [r.row for r in all_rows[first]],
            [r.row for r in all_rows[second]],
            unit=unit,
            **stats,
        )
        unusable = {n: not_evaluable[n] for n in (first, second) if n in not_evaluable}
        if unusable:
            record["not_evaluable"] = unusable
        paired_records.append(record)
        if difference is not None:
            for name, why in unusable.items():
                difference = withheld_figure(difference, name, why)
            differences.append(difference)

    every = {"unchecked": baseline_figures, **subjects, **paired_figures}
    saturation = corpus_saturation(corpus)
    human_blocks: list[Block] = []
    human_record: dict[str, Any] | None = None
    if is_human_run(manifest):
        human_blocks, human_record = human_report(
            manifest,
            corpus,
            graded,
            {t["trial_id"]: t.get("outcome") or {} for t in ledger.trials},
            sources,
            analysis.confidence,
        )
    sections: list[Block] = [
        TextBlock(
            title="What was run",
            paragraphs=[
                f"{len(corpus.cases)} cases of corpus {corpus.version}, {k} trial(s) per case "
                f"and candidate; unit of analysis: {unit}. Error rates reduce a case's K trials "
                "with any-in-K (one false approval in K trials makes the case a false approval); "
                "success rates with all-in-K. Intervals: Clopper-Pearson and Wilson (two-sided "
                "and one-sided), cluster-robust t on G-1 df and a seeded cluster bootstrap over "
                "domain groups.",
                *[
                    f"{c.name} ({c.kind.value}): members "
                    f"{', '.join(members) if members else 'none (every proposal proceeds)'}; "
                    f"provider relation: {c.provider_relation.value} (a label, not a finding)."
                    for c, members, *_ in entries
                ],
            ],
        ),
        saturation_block(saturation),
        *human_blocks,
        TextBlock(
            title="Failed trials by error class",
            paragraphs=[
                f"{name}: "
                + (
                    ", ".join(f"{cls} {n}" for cls, n in record["error_classes"].items())
                    or "no failed trial"
                )
                for name, record in config_records.items()
                if name != "unchecked"
            ],
        ),
        *[
            ForestBlock(
                title=f"{metric} by configuration",
                figures=[
                    next(f for f in figures if f.name == metric).model_copy(update={"name": name})
                    for name, figures in every.items()
                ],
                xlabel=metric,
                metric=metric,
                note=f"Unit: {unit}. Not-run configurations stay as empty rows. Rows are "
                "coloured by the configuration's gate on this rate (green passed, red failed, "
                "amber not evaluable); the dashed red line is the gate threshold.",
            )
            for metric in HEADLINE
        ],
        *[
            FiguresBlock(title=f"Figures: {name}", figures=figures, folded=True)
            for name, figures in every.items()
        ],
        *confusions,
        *[
            breakdown_block(name, by, breakdowns[name][by])
            for by in ("variant", "group")
            for name in every
            if breakdowns[name][by]
        ],
        drilldown_block(all_rows),
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
        *chain_blocks,
        TextBlock(title="Latency, tokens, cost, holds", paragraphs=operating or ["No trial ran."]),
        TextBlock(
            title="Invalid replies: top reasons",
            paragraphs=reason_lines(invalid) or ["No reply was invalid."],
        ),
    ]
    return TrackAnalysis(
        title="RTB reviewer track",
        subtitle=f"{len(subjects)} reviewer configuration(s) plus the unchecked baseline on "
        f"{len(corpus.cases)} cases x {k} trial(s); unit {unit}",
        subjects=subjects,
        sections=sections,
        qualifications=QUALIFICATIONS,
        evaluability=evaluability,
        instruments=frozenset(instruments),
        response_figures=RESPONSE_FIGURES,
        expected_to_fail=frozenset(instruments),  # every sentinel is built to fail a gate
        record={
            "review": {
                "corpus_version": corpus.version,
                "unit": unit,
                "trials_per_case": k,
                "reductions": {
                    "error_rates": "any trial of the unit had the event",
                    "success_rates": "every trial of the unit had the event",
                },
                "baseline": {"unchecked": [f.model_dump(mode="json") for f in baseline_figures]},
                "configurations": config_records,
                "breakdowns": breakdowns,
                "paired": paired_records,
                "chains": chain_records,
                "trials": trial_records,
                "human": human_record,
                "corpus_saturation": saturation.model_dump(mode="json"),
                "answer_extraction": parse_options(spec).answer_extraction,
                "invalid_reasons": invalid,
            },
            # Printed by `trustbench report` under the gates (core reads only this key).
            "console_notes": reason_lines(invalid),
        },
    )
