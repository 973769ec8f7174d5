"""Summaries in the TRB report: profile vector, baselines table, flags, flat rows, caveats."""

from __future__ import annotations

from typing import Any

from trustbench.core import Manifest
from trustbench.core.figures import Figure, not_run_figure
from trustbench.core.report import FiguresBlock, ProfileBlock
from trustbench.trb._run import BASELINES
from trustbench.trb._schema import TRB_VERSION
from trustbench.trb._track._collect import Collected
from trustbench.trb._track._corpus_source import LoadedCorpus
from trustbench.trb._track._lookup import (
    BOOTSTRAP,
    bootstrap_bounds,
    find_figure,
    measured_estimate,
    split_name,
)
from trustbench.trb._track._measures import AXIS_TRACKS, PROFILE_AXES, TrbMeasure
from trustbench.trb._track._options import TrbTrackOptions


def profile_summary(
    candidates: list[str], subjects: dict[str, list[Figure]], measures: list[TrbMeasure]
) -> tuple[dict[str, Any], ProfileBlock]:
    """The six-axis profile per candidate (record entry and report block), never averaged."""
    by_axis = {m.axis: m for m in measures}
    record: dict[str, Any] = {}
    series: dict[str, list[float | None]] = {}
    errors: dict[str, list[tuple[float, float] | None]] = {}
    for candidate in candidates:
        record[candidate] = {}
        series[candidate], errors[candidate] = [], []
        for axis in PROFILE_AXES:
            measure = by_axis.get(axis)
            figure = None if measure is None else find_figure(subjects[candidate], measure.headline)
            low, high = bootstrap_bounds(figure)
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


def baselines_summary(
    manifest: Manifest,
    collected: Collected,
    subjects: dict[str, list[Figure]],
    label_for: Any,
) -> tuple[list[dict[str, Any]], FiguresBlock]:
    """The five spec §4 baselines, each filled by a candidate or "not run".

    `label_for(tier)` gives the description suffix of a row of that adapter tier.
    """
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
        ran = candidate is not None and find_figure(subjects[candidate], "G") is not None
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
            figure = find_figure(subjects[candidate], name) if ran and candidate else None
            if figure is None:
                reason = f"no candidate declares baseline {key!r}" + (
                    " (baselines 1-3 run through a proxy adapter)" if tier == "proxy" else ""
                )
                figure = not_run_figure(name, description=f"{description} {label}", reason=reason)
            figures.append(figure.model_copy(update={"name": f"{key}: {name}"}))
            row[name] = figure.estimate if figure.status == "measured" else None
            row[f"{name}_interval"] = list(bootstrap_bounds(figure))
        rows.append(row)
    block = FiguresBlock(
        title="Baselines (spec §4: run all of them, always)",
        figures=figures,
        note="Instruct, CoT-prompted and CoT-supervised finetune run through a proxy adapter; "
        "the Trace-AI ablation and full models through the native adapter. A candidate fills a "
        "baseline row by its adapter id or `settings.baseline`.",
    )
    return rows, block


def profile_flags(
    candidates: list[str],
    subjects: dict[str, list[Figure]],
    corpus: LoadedCorpus,
    collected: Collected,
    checks: list[dict[str, Any]],
) -> list[str]:
    """Flags a reader must see: provenance, ungoverned adapters, transfer drops, failures."""
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
        g, floor = measured_estimate(figures, "G"), measured_estimate(figures, "G_null_edit_floor")
        if g is not None and floor is not None and g <= floor:
            flags.append(
                f"{candidate}: G {g:.3f} is at or below its null-edit floor {floor:.3f} (the G "
                "it would score ignoring every edit): its r does not govern its action"
            )
        eval_low, _ = bootstrap_bounds(find_figure(figures, "G"))
        _, transfer_high = bootstrap_bounds(find_figure(figures, split_name("transfer", "G")))
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


def flat_rows(
    subjects: dict[str, list[Figure]], collected: Collected, corpus_sha: str
) -> list[dict[str, Any]]:
    """One flat row per figure, each naming TRB version, corpus SHA-256, tier and split."""
    rows = []
    for candidate, figures in subjects.items():
        for figure in figures:
            split, _, metric = (
                figure.name.rpartition(".")
                if "." in figure.name.split("[")[0]
                else ("eval", "", figure.name)
            )
            low, high = bootstrap_bounds(figure)
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


def qualifications(
    corpus: LoadedCorpus, measures: list[TrbMeasure], options: TrbTrackOptions, k: int
) -> list[str]:
    """What these results do not establish (shown at the end of the report)."""
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
