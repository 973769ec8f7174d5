"""Analysis of an `rtb/review` run: grade from the ledger, figures, comparisons, report blocks.

Reads only the frozen manifest, the ledger and the corpus the manifest pins (whose answer key is
read here, on the grader side, and nowhere at trial time). Configurations are built here: the
`unchecked` baseline, one `single` per candidate and the declared chains (see
`trustbench.rtb.review._options`). Gates are evaluated by core on `TrackAnalysis.subjects`:
every candidate and chain, but not the `unchecked` baseline, which is a reference point (what
happens without review), not a release candidate; its figures are still reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any

from trustbench.core import (
    CandidateRecord,
    CandidateSpec,
    Evaluability,
    LedgerContents,
    Manifest,
    TrackAnalysis,
    not_evaluable_reason,
    withheld_figure,
)
from trustbench.core.figures import Figure
from trustbench.core.report import Block, TextBlock
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.human._analysis import (
    human_report,
    is_human_run,
    paired_configurations,
)
from trustbench.rtb.review._analysis_report import Collected, Entry, sections
from trustbench.rtb.review._chain import ConfigurationKind, ReviewConfiguration
from trustbench.rtb.review._configuration_tally import ConfigurationTally
from trustbench.rtb.review._figures import configuration_figures, headline
from trustbench.rtb.review._grading import (
    ConfigurationTrials,
    MemberTrial,
    configuration_rows,
    member_trials,
)
from trustbench.rtb.review._invalid_reasons import invalid_reasons, reason_lines
from trustbench.rtb.review._metrics import ReviewMetrics
from trustbench.rtb.review._options import UNCHECKED, configurations, parse_options
from trustbench.rtb.review._paired import compare, compare_joint
from trustbench.rtb.review._rule_breakdown import rule_breakdown
from trustbench.rtb.review._sections import (
    QUALIFICATIONS,
    chain_block,
    confusion_block,
    operating_line,
)
from trustbench.rtb.review._shortcuts import corpus_saturation
from trustbench.rtb.review._trial_records import not_run_row, record_row
from trustbench.rtb.review._validation import Outcome
from trustbench.rtb.review.reviewers import SENTINEL_NAMES


def _configuration_record(
    configuration: ReviewConfiguration,
    member_names: list[str],
    candidates: dict[str, CandidateRecord],
    tally: ConfigurationTally,
    metrics: ReviewMetrics | None,
    not_run: int,
) -> dict[str, Any]:
    reported = sorted(tally.reported_models)
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
        "trials": tally.trials,
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


@dataclass(frozen=True)
class _Run:
    """The run-wide inputs every step reads."""

    manifest: Manifest
    corpus: Corpus
    unit: Any
    k: int
    stats: dict[str, Any]
    own_specs: dict[str, CandidateSpec]
    cases: dict[str, Any]


def _entries(run: _Run, graded: Any) -> tuple[list[Entry], Any]:
    """Every configuration to report: this run's own, then the paired human ones."""
    manifest, corpus = run.manifest, run.corpus
    # A human run pairs its participants with AI configurations of earlier, verified runs; they
    # join the report as configurations of their own (figures, paired comparisons), not as gated
    # subjects of this run.
    paired, sources = (
        paired_configurations(manifest, corpus) if is_human_run(manifest) else ([], {})
    )
    own_records = {c.name: c for c in manifest.candidates}
    entries: list[Entry] = [
        (c, m, *configuration_rows(c, m, corpus, run.k, graded), own_records)
        for c, m in configurations(manifest.spec)
    ]
    entries += [(p.configuration, p.members, p.rows, p.not_run, p.candidates) for p in paired]
    return entries, (paired, sources)


def _classify(
    run: _Run, out: Collected, entry: Entry, figures: list[Figure], evaluability: Evaluability
) -> None:
    """File a configuration's figures as baseline, paired or gated subject (with evaluability)."""
    configuration, members, _, _, _ = entry
    name = configuration.name
    if configuration.kind is ConfigurationKind.UNCHECKED:
        out.baseline_figures = figures
        return
    if name in out.paired_names:
        out.paired_figures[name] = figures
        return
    out.subjects[name] = figures
    out.evaluability[name] = evaluability
    if members and all(_is_sentinel(run.own_specs.get(m)) for m in members):
        out.instruments.add(name)
    minimum = run.manifest.spec.analysis.min_valid_response_rate
    why = not_evaluable_reason(out.evaluability[name], minimum)
    if why is not None and name not in out.instruments:
        out.not_evaluable[name] = why  # detail withheld like its figures


def _breakdowns(run: _Run, name: str, tally: ConfigurationTally, why: str | None) -> Any:
    """Headline figures per variant and per group, withheld like the configuration's own."""
    confidence = run.stats["confidence"]
    return {
        key: {
            value: [
                withheld_figure(f, name, why).model_dump(mode="json")
                for f in configuration_figures(
                    parts[value],
                    unit=run.unit,
                    k=run.k,
                    confidence=confidence,
                    seed=0,
                    resamples=100,
                    clustered=False,
                    only=headline(),
                )
            ]
            for value in sorted(parts)
        }
        for key, parts in tally.breakdowns.items()
    }


def _collect(run: _Run, out: Collected, entry: Entry) -> None:
    """Figures, counts, record and report blocks of one configuration (one pass over its trials)."""
    configuration, members, rows, not_run, candidate_records = entry
    name = configuration.name
    out.all_rows[name] = rows
    baseline = configuration.kind is ConfigurationKind.UNCHECKED
    # One pass: each trial is counted and its per-trial row encoded as it is made.
    tally = ConfigurationTally(baseline=baseline)
    if baseline and tally.counts_alike_trials and isinstance(rows, ConfigurationTrials):
        for item, trials in rows.baseline_cases():  # a case's K trials at once
            tally.add_alike(item.row, trials)
            out.trial_rows.add_trials(record_row(name, item), trials)
    else:
        for item in rows:
            tally.add(item)
            out.trial_rows.add(record_row(name, item))
            out.drilldown.add(name, item)
    for case_id, k in not_run:
        out.trial_rows.add(not_run_row(name, run.cases[case_id], k))
    figures = configuration_figures(
        tally.figures, unit=run.unit, k=run.k, baseline=baseline, **run.stats
    )
    _classify(run, out, entry, figures, tally.evaluability)
    metrics = tally.metrics.result() if tally.trials else None
    record = _configuration_record(
        configuration, members, candidate_records, tally, metrics, len(not_run)
    )
    record["error_classes"] = tally.error_classes
    out.config_records[name] = record
    out.breakdowns[name] = _breakdowns(run, name, tally, out.not_evaluable.get(name))
    if metrics is None:
        return
    out.confusions.append(confusion_block(name, metrics))
    if not baseline:
        out.operating.append(operating_line(name, metrics))
    if metrics.chain is not None:
        block, chain_record = chain_block(name, metrics, members, out.not_evaluable.get(name))
        out.chain_blocks.append(block)
        out.chain_records[name] = chain_record


def _comparisons(
    run: _Run, out: Collected, names: list[str]
) -> tuple[list[dict[str, Any]], list[Figure]]:
    """Every pair of configurations compared on their joint trials (withheld where needed)."""
    records: list[dict[str, Any]] = []
    differences: list[Figure] = []
    for first, second in combinations(names, 2):
        rows_a, rows_b = out.all_rows[first], out.all_rows[second]
        if isinstance(rows_a, ConfigurationTrials) and isinstance(rows_b, ConfigurationTrials):
            joint = rows_a.joint_decisions(rows_b)  # both were counted in full (`_collect`)
            record, difference = compare_joint(first, second, joint, unit=run.unit, **run.stats)
        else:  # a paired human configuration: its trials are a list
            sides = (r.row for r in rows_a), (r.row for r in rows_b)
            record, difference = compare(first, second, *sides, unit=run.unit, **run.stats)
        unusable = {n: out.not_evaluable[n] for n in (first, second) if n in out.not_evaluable}
        if unusable:
            record["not_evaluable"] = unusable
        records.append(record)
        if difference is not None:
            for name, why in unusable.items():
                difference = withheld_figure(difference, name, why)
            differences.append(difference)
    return records, differences


def analyze_review(manifest: Manifest, ledger: LedgerContents, corpus: Corpus) -> TrackAnalysis:
    """Grade an `rtb/review` run and build its figures, comparisons and report sections."""
    spec = manifest.spec
    analysis = spec.analysis
    human = is_human_run(manifest)
    invalid_members: list[MemberTrial] = []  # in ledger order: each reason's first example
    in_order: list[MemberTrial] = []  # a human run's graded trials (few), in ledger order

    def seen(member: MemberTrial) -> None:
        if member.validated.outcome is Outcome.INVALID:
            invalid_members.append(member)
        if human:
            in_order.append(member)

    graded = member_trials(manifest, ledger, corpus, on_graded=seen)
    invalid = invalid_reasons(invalid_members)
    run = _Run(
        manifest=manifest,
        corpus=corpus,
        unit=analysis.unit,
        k=spec.trials_per_case,
        stats={
            "confidence": analysis.confidence,
            "seed": analysis.bootstrap_seed,
            "resamples": analysis.bootstrap_resamples,
        },
        own_specs={c.name: c for c in spec.candidates},
        cases={case.case_id: case for case in corpus.cases},
    )
    entries, (paired, sources) = _entries(run, graded)
    out = Collected(paired_names=frozenset(p.name for p in paired))
    for entry in entries:
        _collect(run, out, entry)
    out.rule_breakdown = rule_breakdown(
        corpus, out.all_rows, out.not_evaluable, skip=frozenset({UNCHECKED})
    )
    comparisons = _comparisons(run, out, [entry[0].name for entry in entries])
    saturation = corpus_saturation(corpus)
    human_blocks: list[Block] = []
    human_record: dict[str, Any] | None = None
    if human:
        outcomes = {t["trial_id"]: t.get("outcome") or {} for t in ledger.trials}
        ordered = {(m.case.case_id, m.candidate, m.trial): m for m in in_order}
        human_blocks, human_record = human_report(
            manifest, corpus, ordered, outcomes, sources, analysis.confidence
        )
    return TrackAnalysis(
        title="RTB reviewer track",
        subtitle=f"{len(out.subjects)} reviewer configuration(s) plus the unchecked baseline on "
        f"{len(corpus.cases)} cases x {run.k} trial(s); grouping {run.unit}",
        subjects=out.subjects,
        sections=[
            *sections(run, out, entries, comparisons, human_blocks, saturation),
            TextBlock(
                title="Invalid replies: top reasons",
                paragraphs=reason_lines(invalid) or ["No reply was invalid."],
            ),
        ],
        qualifications=QUALIFICATIONS,
        evaluability=out.evaluability,
        instruments=frozenset(out.instruments),
        response_figures=RESPONSE_FIGURES,
        expected_to_fail=frozenset(out.instruments),  # every sentinel is built to fail a gate
        trial_rows={"review": out.trial_rows},
        record={
            "review": {
                "corpus_version": corpus.version,
                "unit": run.unit,
                "estimand": "every rate per evaluated trial; intervals grouped by the unit",
                "trials_per_case": run.k,
                "reductions": {
                    "error_rates": "exact bound: a case counts when any of its trials had it",
                    "success_rates": "exact bound: a case counts when every trial had it",
                },
                "baseline": {
                    "unchecked": [f.model_dump(mode="json") for f in out.baseline_figures]
                },
                "configurations": out.config_records,
                "breakdowns": out.breakdowns,
                "rule_breakdown": out.rule_breakdown,
                "paired": comparisons[0],
                "chains": out.chain_records,
                "human": human_record,
                "corpus_saturation": saturation.model_dump(mode="json"),
                "answer_extraction": parse_options(spec).answer_extraction,
                "invalid_reasons": invalid,
            },
            # Printed by `trustbench report` under the gates (core reads only this key).
            "console_notes": reason_lines(invalid),
        },
    )
