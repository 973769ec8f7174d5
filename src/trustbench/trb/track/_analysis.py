"""The `trb/profile` report: figures, Delta_gov, baselines and the profile vector from a ledger.

Reads only the frozen manifest, the recorded trials and the corpus the manifest pins (for the
grader-only labels and denominators). Per adapter and split every registered measure gives its
trace-clustered figures (`_track._collect` turns trials into rows); the governance gap compares
the declared (full, ablation) pair on the eval split, paired by trace, and oracle candidates are
checked against their closed forms (`_track._comparisons`); the five spec §4 baselines and the
six profile axes are always listed, each "not run" until something ran it, with flags and
caveats (`_track._summaries`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trustbench.core import (
    LedgerContents,
    Manifest,
    TrackAnalysis,
    not_evaluable_subjects,
    withheld_figure,
)
from trustbench.core.figures import Figure, not_run_figure
from trustbench.core.report import FiguresBlock, ForestBlock, TextBlock
from trustbench.trb.adapter._schema import TRB_VERSION
from trustbench.trb.corpus._format import Trace
from trustbench.trb.measures._gap import SEED_GAP_FIGURE
from trustbench.trb.track._collect import Collected, collect_trials
from trustbench.trb.track._comparisons import (
    gap_analysis,
    gap_star_figure,
    oracle_checks,
    seed_gap_analysis,
    threshold_comparison,
)
from trustbench.trb.track._corpus_source import LoadedCorpus
from trustbench.trb.track._lookup import BOOTSTRAP, find_figure
from trustbench.trb.track._measures import StatsPlan, TrbMeasure
from trustbench.trb.track._options import TrbTrackOptions
from trustbench.trb.track._profile_core import measure_figures
from trustbench.trb.track._r_star_figures import r_star_record
from trustbench.trb.track._summaries import (
    baseline_of,
    baselines_summary,
    flat_rows,
    profile_flags,
    profile_summary,
    qualifications,
)
from trustbench.trb.track._trust_summary import baseline_coincidence, trust_summary


def _gap_block(
    figure: Figure,
    record: dict[str, Any],
    pair: tuple[str, str],
    stats: StatsPlan,
    seeds: Figure | None,
) -> FiguresBlock:
    test = record.get("sign_flip_test") or {}
    note = f"Paired by trace on the eval split ({record.get('paired_traces', 0)} traces): "
    note += f"{pair[0]} vs {pair[1]}. "
    if test:
        note += (
            f"Sign-flip test ({test['method']}, {test['patterns']} patterns, seed "
            f"{test['seed']}): two-sided p = {test['p_value']:.4g}. "
        )
    note += f"Bootstrap: seed {stats.seed}, {stats.resamples} resamples. Pass bar (spec §3): "
    note += "lower bound > 0. "
    seed_record = record.get("seeds") or {}
    if seeds is None:
        note += f"Seeds: not run ({seed_record.get('reason', 'no seed replicas')})."
    else:
        note += (
            f"{SEED_GAP_FIGURE}: seeds {seed_record.get('seeds')}, seed-and-trace bootstrap "
            "(resample seed pairs, then traces)."
        )
    shown = [figure] if seeds is None else [figure, seeds]
    return FiguresBlock(title="Governance gap Delta_gov", figures=shown, note=note)


RESPONSE_FIGURES = frozenset({"invalid_response_rate"})
"""Figures that count the adapter's answers themselves: shown even when it is not evaluable."""


def _stats_plan(manifest: Manifest) -> StatsPlan:
    """The run's interval settings, from the frozen spec's `analysis`."""
    analysis = manifest.spec.analysis
    return StatsPlan(analysis.confidence, analysis.bootstrap_seed, analysis.bootstrap_resamples)


def _gap_label(corpus_sha: str) -> str:
    return f"[{TRB_VERSION}; corpus sha256 {corpus_sha[:16]}; adapter tier native; eval split]"


def scored_figures(
    manifest: Manifest,
    collected: Collected,
    *,
    options: TrbTrackOptions,
    measures: list[TrbMeasure],
    corpus_sha: str,
) -> tuple[dict[str, list[Figure]], dict[tuple[str, str], list[Figure]]]:
    """Every candidate's figures from its trials, a non-evaluable candidate's withheld.

    The one step from trials to figures, whether the trials came from a ledger (the report) or
    were measured in this process (`trustbench.trb.measure_profile`), so both give one number.

    Returns:
        Candidate -> all its figures, and (candidate, split) -> that split's figures.
    """
    stats = _stats_plan(manifest)
    subjects: dict[str, list[Figure]] = {}
    per_split_figures: dict[tuple[str, str], list[Figure]] = {}
    for candidate in (c.name for c in manifest.spec.candidates):
        subjects[candidate], by_split = measure_figures(
            collected, candidate, options.splits, measures, stats, corpus_sha
        )
        for split, figs in by_split.items():
            per_split_figures[(candidate, split)] = figs
    # A candidate that (almost) never answered is not evaluable: its figures are withheld before
    # any summary, block or flag reads them (core withholds them in the record and page too).
    minimum = manifest.spec.analysis.min_valid_response_rate
    unusable = not_evaluable_subjects(collected.evaluability(), minimum, collected.oracles())
    for candidate, why in unusable.items():
        if candidate in subjects:
            subjects[candidate] = [
                withheld_figure(f, candidate, why, RESPONSE_FIGURES) for f in subjects[candidate]
            ]
    return subjects, per_split_figures


def profile_and_gap(
    manifest: Manifest,
    collected: Collected,
    *,
    options: TrbTrackOptions,
    corpus_sha: str,
    measures: list[TrbMeasure],
    gap: tuple[str, str] | None,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, list[Figure]]]:
    """The record's `trb.profile` and `trb.governance_gap`, and every candidate's figures.

    What `analyze_profile` puts in the record, for trials measured in this process.
    """
    subjects, _ = scored_figures(
        manifest, collected, options=options, measures=measures, corpus_sha=corpus_sha
    )
    _, gap_record, _ = _gap_figures(
        collected, gap, options, _stats_plan(manifest), _gap_label(corpus_sha), subjects
    )
    candidates = [c.name for c in manifest.spec.candidates]
    profile, _ = profile_summary(candidates, subjects, measures)
    return profile, gap_record, subjects


def analyze_profile(
    manifest: Manifest,
    ledger: LedgerContents,
    *,
    options: TrbTrackOptions,
    corpus: LoadedCorpus,
    cases: dict[str, Trace],
    measures: list[TrbMeasure],
    gap: tuple[str, str] | None,
) -> TrackAnalysis:
    """Grade a `trb/profile` run from its ledger (see the module docstring)."""
    spec = manifest.spec
    stats = _stats_plan(manifest)
    corpus_sha = corpus.manifest.corpus_sha256
    collected = collect_trials(ledger, cases, measures)
    candidates = [c.name for c in spec.candidates]
    subjects, per_split_figures = scored_figures(
        manifest, collected, options=options, measures=measures, corpus_sha=corpus_sha
    )
    gap_figure, gap_record, seed_figure = _gap_figures(
        collected, gap, options, stats, _gap_label(corpus_sha), subjects
    )
    checks = oracle_checks(collected, subjects)

    def series_name(candidate: str) -> str:
        baseline = baseline_of(manifest, candidate)
        return candidate if baseline in (None, candidate) else f"{candidate} ({baseline})"

    profile, profile_block = profile_summary(candidates, subjects, measures, series_name)
    baselines, baselines_block = baselines_summary(
        manifest,
        collected,
        subjects,
        measures,
        lambda tier: (
            f"[{TRB_VERSION}; corpus sha256 {corpus_sha[:16]}; adapter tier {tier}; eval split]"
        ),
        corpus_sha=corpus_sha,
        synthetic_share=corpus.manifest.provenance.synthetic_share,
    )
    flags = profile_flags(candidates, subjects, corpus, collected, checks, measures)
    trust, trust_block, trust_gates = trust_summary(manifest, candidates, subjects, flags,
                                                    collected, gap)  # fmt: skip

    sections: list[Any] = [trust_block]
    if gap_figure is not None and gap is not None:
        sections.append(_gap_block(gap_figure, gap_record, gap, stats, seed_figure))
    sections.append(profile_block)
    sections.append(baselines_block)
    g_figures = [
        (
            find_figure(subjects[c], "G") or not_run_figure("G", description="", reason="not run")
        ).model_copy(update={"name": c})
        for c in candidates
    ]
    sections.append(
        ForestBlock(
            title="G per adapter (eval split)",
            figures=g_figures,
            interval_method=BOOTSTRAP,
            xlabel="G = 1 - mean TV",
            note="95% trace-clustered bootstrap percentile intervals.",
        )
    )
    sections.append(TextBlock(title="Flags", paragraphs=flags or ["none"]))
    declared = {"adversarial": options.r_star_adversarial_per_step,
                "ood": options.r_star_ood_per_step}  # fmt: skip
    r_star, r_star_lines = r_star_record(declared, subjects)
    title = "R*: adversarial and out-of-distribution r' (eval split)"
    sections.append(TextBlock(title=title, paragraphs=r_star_lines))
    sections += _split_blocks(candidates, collected, options.splits, per_split_figures)
    if checks:
        sections.append(
            TextBlock(
                title="Harness self-check: oracle candidates vs closed forms",
                paragraphs=[
                    f"{c['oracle']} {c['metric']}: measured {c['measured']}, closed form "
                    f"{c['expected']:.9f}: {'pass' if c['passed'] else 'FAIL'}"
                    for c in checks
                ],
            )
        )
    share = corpus.manifest.provenance
    record = {
        "trb": {
            "version": TRB_VERSION,
            "corpus": {
                "sha256": corpus_sha,
                "kind": corpus.manifest.kind,
                "provenance": share.model_dump(mode="json"),
                "traces": {k: v.n_traces for k, v in corpus.manifest.splits.items()},
                "cases_per_split": {
                    s: sum(t.split == s for t in cases.values()) for s in options.splits
                },
            },
            "adapters": {
                c: {
                    "adapter": collected.adapters.get(c),
                    "tier": collected.tiers.get(c),
                    "isolation": collected.isolation.get(c, "not run"),
                }
                for c in candidates
            },
            "verdicts": trust,
            "governance_gap": gap_record,
            "r_star": r_star,
            "grounding_threshold": threshold_comparison(subjects, gap),
            "baselines": baselines,
            "profile": profile,
            "flags": flags,
            "oracle_checks": checks,
            "trials": {
                "failed": dict(collected.failed),
                "not_applicable": {k: len(v) for k, v in collected.not_applicable.items()},
            },
            "rows": flat_rows(subjects, collected, corpus_sha),
        }
    }
    n_cases = len(cases)
    return TrackAnalysis(
        title=f"{TRB_VERSION} profile",
        subtitle=(
            f"{len(candidates)} adapter(s) x {n_cases} held-out traces "
            f"({', '.join(options.splits)}); corpus sha256 {corpus_sha}"
        ),
        subjects=subjects,
        sections=sections,
        qualifications=qualifications(
            corpus, measures, options, spec.trials_per_case, gap_record.get("seeds")
        )
        + baseline_coincidence(manifest, subjects, [m.headline for m in measures]),
        record=record,
        evaluability=collected.evaluability(),
        instruments=collected.oracles(),
        response_figures=RESPONSE_FIGURES,
        implicit_gates=trust_gates,
    )


def _gap_figures(
    collected: Collected,
    gap: tuple[str, str] | None,
    options: TrbTrackOptions,
    stats: StatsPlan,
    gap_label: str,
    subjects: dict[str, list[Figure]],
) -> tuple[Figure | None, dict[str, Any], Figure | None]:
    """Delta_gov (on G and G*) and its seed-to-seed spread, added to the full model's figures.

    Returns the Delta_gov figure, its record (seeds included) and the seed figure.
    """
    gap_figure, gap_record = gap_analysis(collected, gap, stats, gap_label)
    if gap_figure is not None and gap is not None:
        subjects[gap[0]].append(gap_figure)
        star = gap_star_figure(collected, gap, stats, gap_label)  # Delta_gov on G* (issue 16)
        if star is not None:
            subjects[gap[0]].append(star)
    seed_figure, seed_record = seed_gap_analysis(
        collected, gap, options.train.seed, stats, gap_label
    )
    if seed_figure is not None and gap is not None:
        subjects[gap[0]].append(seed_figure)
    gap_record = {**gap_record, "seeds": seed_record}
    return gap_figure, gap_record, seed_figure


def _split_blocks(
    candidates: list[str],
    collected: Collected,
    splits: Sequence[str],
    per_split_figures: dict[tuple[str, str], list[Figure]],
) -> list[FiguresBlock]:
    """One folded block of figures per candidate and split."""
    blocks: list[FiguresBlock] = []
    for candidate in candidates:
        adapter = collected.adapters.get(candidate, "not run")
        tier = collected.tiers.get(candidate, "not run")
        for split in splits:
            blocks.append(
                FiguresBlock(
                    title=f"{candidate}: {split} split ({adapter}, {tier} tier)",
                    figures=per_split_figures[(candidate, split)],
                    note="Trace-clustered intervals (cluster-robust t and seeded bootstrap).",
                    folded=True,
                )
            )
    return blocks
