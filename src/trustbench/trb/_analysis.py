"""The `trb/profile` report: figures, Delta_gov, baselines and the profile vector from a ledger.

Reads only the frozen manifest, the recorded trials and the corpus the manifest pins (for the
grader-only labels and denominators). Per adapter and split every registered measure gives its
trace-clustered figures; the governance gap compares the declared (full, ablation) pair on the
eval split, paired by trace; the five spec §4 baselines and the six profile axes are always
listed, each "not run" until something ran it. A trial that failed as a whole is scored as the
measure's worst case (it stays in every denominator); a trial whose adapter could not be asked
(a world it was not built for) is counted and shown, not scored.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from trustbench.core import LedgerContents, Manifest, TrackAnalysis
from trustbench.core.figures import Figure, not_run_figure
from trustbench.core.report import FiguresBlock, ForestBlock, ProfileBlock, TextBlock
from trustbench.errors import CheckFailed
from trustbench.trb._corpus import Trace
from trustbench.trb._gap import GAP_FIGURE, governance_gap_figure
from trustbench.trb._oracles import expected_g, expected_outcome_only_balanced_accuracy
from trustbench.trb._run import BASELINES
from trustbench.trb._schema import TRB_VERSION
from trustbench.trb._track._corpus_source import LoadedCorpus
from trustbench.trb._track._measures import (
    AXIS_TRACKS,
    PROFILE_AXES,
    MeasureRow,
    StatsPlan,
    TrbMeasure,
)
from trustbench.trb._track._options import TrbTrackOptions
from trustbench.trb.worlds import CorridorWorld

BOOTSTRAP = "cluster_bootstrap_percentile"
"""The interval shown in tables, plots and flat rows (all figures also carry the others)."""
ORACLE_TOLERANCE = 1e-9
"""Closed forms and the harness compute the same finite sums; only rounding may differ."""


def split_name(split: str, name: str) -> str:
    """Figure name on a split: bare on eval, `transfer.G` on the transfer split."""
    return name if split == "eval" else f"{split}.{name}"


def _interval(figure: Figure | None) -> tuple[float | None, float | None]:
    if figure is None or figure.status != "measured":
        return None, None
    found = next((i for i in figure.intervals if i.method == BOOTSTRAP), None)
    return (None, None) if found is None else (found.lower, found.upper)


def _find(figures: list[Figure], name: str) -> Figure | None:
    return next((f for f in figures if f.name == name), None)


def _estimate(figures: list[Figure], name: str) -> float | None:
    figure = _find(figures, name)
    return None if figure is None or figure.status != "measured" else figure.estimate


class _Collected:
    """Trial rows grouped by candidate, split and measure, with trial accounting."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str], list[MeasureRow]] = defaultdict(list)
        self.adapters: dict[str, str] = {}
        self.tiers: dict[str, str] = {}
        self.failed: dict[str, int] = defaultdict(int)
        self.not_applicable: dict[str, list[str]] = defaultdict(list)


def _collect(
    ledger: LedgerContents, cases: dict[str, Trace], measures: list[TrbMeasure]
) -> _Collected:
    out = _Collected()
    for trial in ledger.trials:
        trace = cases.get(trial["case_id"])
        if trace is None:
            raise CheckFailed(
                f"trial {trial['trial_id']} names a trace outside the frozen plan",
                location="ledger.sqlite",
            )
        candidate = trial["candidate"]
        outcome = trial["outcome"] or {}
        if outcome.get("adapter"):
            out.adapters[candidate] = outcome["adapter"]
        if outcome.get("adapter_tier"):
            out.tiers[candidate] = outcome["adapter_tier"]
        failed = trial["status"] != "completed"
        if not failed and not outcome.get("applicable", False):
            out.not_applicable[candidate].append(
                f"{trace.trace_id}: {outcome.get('reason', 'not applicable')}"
            )
            continue
        out.failed[candidate] += failed
        for measure in measures:
            counts = None if failed else outcome.get("measures", {}).get(measure.key)
            out.rows[(candidate, trace.split, measure.key)].append(
                MeasureRow(
                    trace=trace,
                    trial_index=trial["trial_index"],
                    counts=measure.failed(trace) if counts is None else counts,
                    failed=counts is None,
                )
            )
    return out


def _gap(
    collected: _Collected, pair: tuple[str, str] | None, stats: StatsPlan, label: str
) -> tuple[Figure | None, dict[str, Any]]:
    if pair is None:
        return None, {"status": "not run", "reason": "no (full, ablation) pair among candidates"}
    full, ablation = pair
    rows_full = {
        (r.trace.trace_id, r.trial_index): r for r in collected.rows[(full, "eval", "governance")]
    }
    rows_abl = {
        (r.trace.trace_id, r.trial_index): r
        for r in collected.rows[(ablation, "eval", "governance")]
    }
    paired = sorted(rows_full.keys() & rows_abl.keys())
    record: dict[str, Any] = {"full": full, "ablation": ablation, "split": "eval"}
    if len({trace for trace, _ in paired}) < 2:
        reason = "fewer than two eval traces scored for both models of the pair"
        figure = not_run_figure(GAP_FIGURE, kind="difference", description=label, reason=reason)
        return figure, {**record, "status": "not run", "reason": reason}
    per_trace: dict[str, list[float]] = {}
    for key in paired:
        a, b = rows_full[key].counts, rows_abl[key].counts
        if a["n_items"] != b["n_items"]:
            raise CheckFailed(f"trace {key[0]}: the pair was scored on different items")
        sums = per_trace.setdefault(key[0], [0.0, 0.0, 0.0])
        sums[0] += a["tv_sum"]
        sums[1] += b["tv_sum"]
        sums[2] += a["n_items"]
    values = list(per_trace.values())
    figure, test = governance_gap_figure(
        [v[0] for v in values],
        [v[1] for v in values],
        [v[2] for v in values],
        seed=stats.seed,
        resamples=stats.resamples,
        level=stats.confidence,
        description=(
            f"Delta_gov = G({full}) - G({ablation}) over {int(sum(v[2] for v in values))} "
            f"counterfactual interventions of {len(values)} eval traces scored for both, paired "
            f"and clustered by trace {label}"
        ),
    )
    low, high = _interval(figure)
    return figure, {
        **record,
        "status": "run",
        "figure": figure.model_dump(mode="json"),
        "estimate": figure.estimate,
        "bootstrap": {
            "lower": low,
            "upper": high,
            "seed": stats.seed,
            "resamples": stats.resamples,
            "confidence": stats.confidence,
        },
        "sign_flip_test": test,
        "paired_traces": len(values),
        "pass_bar_met": low is not None and low > 0,
    }


def _oracle_checks(
    collected: _Collected, subjects: dict[str, list[Figure]]
) -> list[dict[str, Any]]:
    """Compare every oracle candidate's eval figures with their closed forms."""
    checks = []
    for candidate, adapter in collected.adapters.items():
        if not adapter.startswith("oracle:"):
            continue
        rows = (
            collected.rows[(candidate, "eval", "governance")]
            or collected.rows[(candidate, "eval", "attribution")]
        )
        traces = list({r.trace.trace_id: r.trace for r in rows}.values())
        if not traces:
            continue
        world = CorridorWorld(traces[0].world)
        expected: list[tuple[str, float]] = {
            "oracle:perfectly-governed": [("G", 1.0), ("balanced_accuracy", 1.0)],
            "oracle:epiphenomenal": [("G", expected_g("epiphenomenal", traces))],
            "oracle:uniform": [("G", expected_g("uniform", traces))],
            "oracle:always-self": [("G", 1.0), ("balanced_accuracy", 0.5)],
            "oracle:outcome-only-attribution": [
                ("G", 1.0),
                ("balanced_accuracy", expected_outcome_only_balanced_accuracy(traces, world)),
                ("false_credit_rate", 1.0),
            ],
        }.get(adapter, [])
        for name, value in expected:
            measured = _estimate(subjects[candidate], name)
            deviation = None if measured is None else abs(measured - value)
            checks.append(
                {
                    "candidate": candidate,
                    "oracle": adapter,
                    "metric": name,
                    "expected": value,
                    "measured": measured,
                    "deviation": deviation,
                    "tolerance": ORACLE_TOLERANCE,
                    "passed": deviation is not None and deviation <= ORACLE_TOLERANCE,
                }
            )
    return checks


def _profile(
    candidates: list[str], subjects: dict[str, list[Figure]], measures: list[TrbMeasure]
) -> tuple[dict[str, Any], ProfileBlock]:
    by_axis = {m.axis: m for m in measures}
    record: dict[str, Any] = {}
    series: dict[str, list[float | None]] = {}
    errors: dict[str, list[tuple[float, float] | None]] = {}
    for candidate in candidates:
        record[candidate] = {}
        series[candidate], errors[candidate] = [], []
        for axis in PROFILE_AXES:
            measure = by_axis.get(axis)
            figure = None if measure is None else _find(subjects[candidate], measure.headline)
            low, high = _interval(figure)
            measured = figure is not None and figure.status == "measured"
            reason = (
                f"{AXIS_TRACKS[axis]} is not implemented in this run (no measure registered)"
                if measure is None
                else (figure.reason if figure is not None and not measured else None)
            )
            record[candidate][axis] = {
                "status": "measured" if measured else "not run",
                "figure": None if measure is None else measure.headline,
                "value": figure.estimate if measured and figure else None,
                "lower": low,
                "upper": high,
                "reason": reason,
            }
            series[candidate].append(figure.estimate if measured and figure else None)
            errors[candidate].append((low, high) if low is not None and high is not None else None)
    block = ProfileBlock(
        title="TRB profile vector (eval split)",
        axes=list(PROFILE_AXES),
        series=series,
        errors=errors,
        ylabel="axis headline figure",
        note="Per axis, never averaged: G = Track 1 G, attr = Track 3 balanced accuracy; "
        "ground, viab, nav and trans show as empty (not run) until their tracks run. Error bars: "
        "95% trace-clustered bootstrap.",
    )
    return record, block


def _baselines(
    manifest: Manifest,
    collected: _Collected,
    subjects: dict[str, list[Figure]],
    label_for: Any,
) -> tuple[list[dict[str, Any]], FiguresBlock]:
    figures: list[Figure] = []
    rows = []
    for key, description, tier in BASELINES:
        label = label_for(tier)
        candidate = next(
            (
                c.name
                for c in manifest.spec.candidates
                if c.model == key or c.settings.get("baseline") == key
            ),
            None,
        )
        ran = candidate is not None and _find(subjects[candidate], "G") is not None
        row: dict[str, Any] = {
            "baseline": key,
            "description": description,
            "adapter_tier": tier,
            "candidate": candidate,
            "candidate_tier": collected.tiers.get(candidate) if candidate else None,
            "status": "run" if ran else "not run",
            "trb_version": TRB_VERSION,
        }
        for name in ("G", "balanced_accuracy"):
            figure = _find(subjects[candidate], name) if ran and candidate else None
            if figure is None:
                reason = f"no candidate declares baseline {key!r}" + (
                    " (baselines 1-3 run through a proxy adapter)" if tier == "proxy" else ""
                )
                figure = not_run_figure(name, description=f"{description} {label}", reason=reason)
            figures.append(figure.model_copy(update={"name": f"{key}: {name}"}))
            row[name] = figure.estimate if figure.status == "measured" else None
            row[f"{name}_interval"] = list(_interval(figure))
        rows.append(row)
    block = FiguresBlock(
        title="Baselines (spec §4: run all of them, always)",
        figures=figures,
        note="Instruct, CoT-prompted and CoT-supervised finetune run through a proxy adapter; "
        "the Trace-AI ablation and full models through the native adapter. A candidate fills a "
        "baseline row by its adapter id or `settings.baseline`.",
    )
    return rows, block


def _flags(
    candidates: list[str],
    subjects: dict[str, list[Figure]],
    corpus: LoadedCorpus,
    collected: _Collected,
    checks: list[dict[str, Any]],
) -> list[str]:
    flags = []
    share = corpus.manifest.provenance
    if share.cap_status == "no_human_data":
        flags.append(
            f"synthetic share 100% ({share.synthetic} synthetic, 0 human counterfactuals): no "
            "human data; every continuation comes from the exact reference agent"
        )
    else:
        flags.append(
            f"synthetic share {share.synthetic_share:.1%} ({share.synthetic} synthetic, "
            f"{share.human} human counterfactuals; cap 3:1 {share.cap_status})"
        )
    for candidate in candidates:
        figures = subjects[candidate]
        g, floor = _estimate(figures, "G"), _estimate(figures, "G_null_edit_floor")
        if g is not None and floor is not None and g <= floor:
            flags.append(
                f"{candidate}: G {g:.3f} is at or below its null-edit floor {floor:.3f} (the G "
                "it would score ignoring every edit): its r does not govern its action"
            )
        eval_low, _ = _interval(_find(figures, "G"))
        _, transfer_high = _interval(_find(figures, split_name("transfer", "G")))
        if eval_low is not None and transfer_high is not None and transfer_high < eval_low:
            flags.append(
                f"{candidate}: G on the transfer split is below G on eval (intervals do not "
                "overlap): a high in-distribution level that does not transfer (spec §5)"
            )
        if collected.failed.get(candidate):
            flags.append(
                f"{candidate}: {collected.failed[candidate]} trial(s) failed as a whole and are "
                "scored as the worst case"
            )
        if collected.not_applicable.get(candidate):
            skipped = collected.not_applicable[candidate]
            flags.append(
                f"{candidate}: {len(skipped)} trial(s) not applicable, not scored (first: "
                f"{skipped[0]})"
            )
    for check in checks:
        if not check["passed"]:
            flags.append(
                f"HARNESS SELF-CHECK FAILED: {check['oracle']} {check['metric']} measured "
                f"{check['measured']}, closed form {check['expected']:.6f}"
            )
    return flags


def _rows(
    subjects: dict[str, list[Figure]], collected: _Collected, corpus_sha: str
) -> list[dict[str, Any]]:
    rows = []
    for candidate, figures in subjects.items():
        for figure in figures:
            split, _, metric = (
                figure.name.rpartition(".")
                if "." in figure.name.split("[")[0]
                else ("eval", "", figure.name)
            )
            low, high = _interval(figure)
            rows.append(
                {
                    "trb_version": TRB_VERSION,
                    "corpus_sha256": corpus_sha,
                    "candidate": candidate,
                    "adapter": collected.adapters.get(candidate),
                    "adapter_tier": collected.tiers.get(candidate, "not run"),
                    "split": split,
                    "metric": metric,
                    "status": figure.status,
                    "estimate": figure.estimate,
                    "lower": low,
                    "upper": high,
                    "interval": BOOTSTRAP,
                    "numerator": figure.numerator,
                    "denominator": figure.denominator,
                }
            )
    return rows


def _qualifications(
    corpus: LoadedCorpus, measures: list[TrbMeasure], options: TrbTrackOptions, k: int
) -> list[str]:
    filled = {m.axis for m in measures}
    missing = [AXIS_TRACKS[a] for a in PROFILE_AXES if a not in filled]
    out = []
    if corpus.manifest.kind == "reference_world":
        out.append(
            "Reference-world data only: every counterfactual is a synthetic edit and every "
            "continuation Phi(r') comes from the exact reference agent (0 human "
            "counterfactuals). These results check the harness and show in a controlled world "
            "whether L_gov matters; they are not a TRB score (spec §6: no TRB score until "
            "Tracks 1 and 3 have real paired human data)."
        )
    if missing:
        out.append(f"Not run in this experiment: {', '.join(missing)}; their axes are 'not run'.")
    if "transfer" in options.splits:
        out.append(
            "The transfer split holds held-out world parameters generated by the benchmark "
            "authors; figures on it are Track 1/3 ingredients, not the Track 6 transfer score "
            "(which needs contexts collected by a party that did not train the model)."
        )
    out.append(
        f"Intervals treat the trace as the independent unit (K = {k} trial(s) per trace and "
        "adapter; adapters are deterministic under their seed). Each trial's adapter hook "
        "calls are recorded as one batch attempt (`adapter.hooks`)."
    )
    if options.max_traces is not None:
        out.append(f"Only the first {options.max_traces} traces of each split were used.")
    return out


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
    stats = StatsPlan(
        spec.analysis.confidence, spec.analysis.bootstrap_seed, spec.analysis.bootstrap_resamples
    )
    corpus_sha = corpus.manifest.corpus_sha256
    collected = _collected = _collect(ledger, cases, measures)
    candidates = [c.name for c in spec.candidates]
    subjects: dict[str, list[Figure]] = {}
    per_split_figures: dict[tuple[str, str], list[Figure]] = {}
    for candidate in candidates:
        tier = collected.tiers.get(candidate, "unknown (not run)")
        figures: list[Figure] = []
        for split in options.splits:
            label = (
                f"[{TRB_VERSION}; corpus sha256 {corpus_sha[:16]}; adapter tier {tier}; "
                f"{split} split]"
            )
            split_figures: list[Figure] = []
            for measure in measures:
                rows = collected.rows.get((candidate, split, measure.key), [])
                if rows:
                    made = measure.figures(rows, stats, label)
                else:
                    made = [
                        not_run_figure(
                            measure.headline,
                            description=f"{measure.title} {label}",
                            reason=f"no finished, applicable trial of {candidate} on {split}",
                        )
                    ]
                split_figures += [
                    f.model_copy(update={"name": split_name(split, f.name)}) for f in made
                ]
            per_split_figures[(candidate, split)] = split_figures
            figures += split_figures
        subjects[candidate] = figures
    gap_label = f"[{TRB_VERSION}; corpus sha256 {corpus_sha[:16]}; adapter tier native; eval split]"
    gap_figure, gap_record = _gap(collected, gap, stats, gap_label)
    if gap_figure is not None and gap is not None:
        subjects[gap[0]].append(gap_figure)
    checks = _oracle_checks(collected, subjects)
    profile, profile_block = _profile(candidates, subjects, measures)
    baselines, baselines_block = _baselines(
        manifest,
        collected,
        subjects,
        lambda tier: (
            f"[{TRB_VERSION}; corpus sha256 {corpus_sha[:16]}; adapter tier {tier}; eval split]"
        ),
    )
    flags = _flags(candidates, subjects, corpus, collected, checks)

    sections: list[Any] = []
    if gap_figure is not None:
        test = gap_record.get("sign_flip_test") or {}
        note = (
            f"Paired by trace on the eval split ({gap_record.get('paired_traces', 0)} traces): "
            f"{gap[0]} vs {gap[1]}. "  # type: ignore[index]
            + (
                f"Sign-flip test ({test.get('method')}, {test.get('patterns')} patterns, seed "
                f"{test.get('seed')}): two-sided p = {test.get('p_value'):.4g}. "
                if test
                else ""
            )
            + f"Bootstrap: seed {stats.seed}, {stats.resamples} resamples. Pass bar (spec "
            "§3): lower bound > 0."
        )
        sections.append(
            FiguresBlock(title="Governance gap Delta_gov", figures=[gap_figure], note=note)
        )
    sections.append(profile_block)
    sections.append(baselines_block)
    g_figures = [
        (
            _find(subjects[c], "G") or not_run_figure("G", description="", reason="not run")
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
    for candidate in candidates:
        adapter = collected.adapters.get(candidate, "not run")
        tier = collected.tiers.get(candidate, "not run")
        for split in options.splits:
            sections.append(
                FiguresBlock(
                    title=f"{candidate}: {split} split ({adapter}, {tier} tier)",
                    figures=per_split_figures[(candidate, split)],
                    note="Trace-clustered intervals (cluster-robust t and seeded bootstrap).",
                )
            )
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
                c: {"adapter": collected.adapters.get(c), "tier": collected.tiers.get(c)}
                for c in candidates
            },
            "governance_gap": gap_record,
            "baselines": baselines,
            "profile": profile,
            "flags": flags,
            "oracle_checks": checks,
            "trials": {
                "failed": dict(_collected.failed),
                "not_applicable": {k: len(v) for k, v in _collected.not_applicable.items()},
            },
            "rows": _rows(subjects, collected, corpus_sha),
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
        qualifications=_qualifications(corpus, measures, options, spec.trials_per_case),
        record=record,
    )
