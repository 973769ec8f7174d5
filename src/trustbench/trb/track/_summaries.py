"""Summaries in the TRB report: profile vector, baselines table, flags, flat rows, caveats."""

from __future__ import annotations

from typing import Any

from trustbench.core import Manifest
from trustbench.core.figures import Figure, not_run_figure
from trustbench.core.report import FiguresBlock, ProfileBlock
from trustbench.trb.adapter._schema import EDITABLE_SLOTS, TRB_VERSION
from trustbench.trb.corpus._provenance import over_cap_label, provenance_share
from trustbench.trb.profile._vector import BASELINES
from trustbench.trb.track._collect import Collected
from trustbench.trb.track._corpus_source import LoadedCorpus
from trustbench.trb.track._governance_flags import governance_flags
from trustbench.trb.track._lookup import (
    BOOTSTRAP,
    bootstrap_bounds,
    find_figure,
    measured_estimate,
)
from trustbench.trb.track._measures import AXIS_TRACKS, PROFILE_AXES, TrbMeasure
from trustbench.trb.track._options import TrbTrackOptions
from trustbench.trb.track._phi_source import paired_data_flags
from trustbench.trb.track._transfer_flags import (
    g_below_eval,
    transfer_drop_flags,
)
from trustbench.trb.track._viability_flags import viability_flags


def baseline_of(manifest: Manifest, candidate: str) -> str | None:
    """The spec §4 baseline a candidate fills (its `settings.baseline` or adapter id).

    A `proxy:` prefix of the adapter id is dropped; None when neither names a baseline.
    """
    keys = {key for key, _, _ in BASELINES}
    spec = next(c for c in manifest.spec.candidates if c.name == candidate)
    for value in (spec.settings.get("baseline"), (spec.model or "").removeprefix("proxy:")):
        if value in keys:
            return str(value)
    return None


def _status_label(figure: Figure | None) -> str:
    """How the profile record states a figure: measured, not evaluable, or not run."""
    if figure is None or figure.status in ("not_run", "not_applicable"):
        return "not run"
    return "not evaluable" if figure.status == "not_evaluable" else "measured"


def profile_summary(
    candidates: list[str],
    subjects: dict[str, list[Figure]],
    measures: list[TrbMeasure],
    series_name: Any = str,
) -> tuple[dict[str, Any], ProfileBlock]:
    """The six-axis profile per candidate (record entry and report block), never averaged.

    `series_name(candidate)` labels the candidate's bars (e.g. with the baseline it fills).
    """
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
                "status": _status_label(figure),
                "figure": None if measure is None else measure.headline,
                "value": figure.estimate if measured and figure else None,
                "lower": low,
                "upper": high,
                "reason": reason,
            }
            series[candidate].append(figure.estimate if measured and figure else None)
            errors[candidate].append((low, high) if low is not None and high is not None else None)
    headline_of = ", ".join(
        f"{axis} = {by_axis[axis].headline}" if axis in by_axis else f"{axis} = not run"
        for axis in PROFILE_AXES
    )
    block = ProfileBlock(
        title="TRB profile vector per adapter (eval split)",
        axes=list(PROFILE_AXES),
        series={series_name(c): v for c, v in series.items()},
        errors={series_name(c): v for c, v in errors.items()},
        ylabel="axis headline figure",
        # No radar: the axes are on different scales, and a shared radial scale would squash
        # the 0-1 axes just as one shared bar axis did; the small multiples keep each its own.
        radar=False,
        note=f"Per axis, never averaged ({headline_of}). An axis that was not run is left "
        "empty, never drawn as 0. Axes have different scales: AUC and balanced accuracy have "
        "chance 0.5, the viability retention ratio has 'no change' at 1, the navigability lift "
        "has 'no effect' at 0. Error bars: 95% trace-clustered bootstrap (trans: the interval "
        "of G on the worst transfer context).",
    )
    return record, block


def baselines_summary(
    manifest: Manifest,
    collected: Collected,
    subjects: dict[str, list[Figure]],
    measures: list[TrbMeasure],
    label_for: Any,
    *,
    corpus_sha: str,
    synthetic_share: float | None,
) -> tuple[list[dict[str, Any]], FiguresBlock]:
    """The five spec §4 baselines, each filled by a candidate or "not run".

    Per row: every measure's headline (eval split) with its interval, slot accuracy beside G,
    and the TRB version, corpus SHA-256, synthetic share and adapter tier.
    `label_for(tier)` gives the description suffix of a row of that adapter tier.
    """
    figures: list[Figure] = []
    rows = []
    axis_of = {m.headline: m.axis for m in measures}
    names = [m.headline for m in measures]
    if "G_star" in names:  # raw G and slot accuracy beside the G* headline (issue 16)
        names += ["G", *(f"slot_accuracy[{s}]" for s in EDITABLE_SLOTS)]
    for key, description, tier in BASELINES:
        label = label_for(tier)
        candidate = next(
            (c.name for c in manifest.spec.candidates if baseline_of(manifest, c.name) == key),
            None,
        )
        ran = candidate is not None and bool(collected.tiers.get(candidate))
        row: dict[str, Any] = {
            "baseline": key,
            "description": description,
            "adapter_tier": tier,
            "candidate": candidate,
            "candidate_tier": collected.tiers.get(candidate) if candidate else None,
            "status": "run" if ran else "not run",
            "trb_version": TRB_VERSION,
            "corpus_sha256": corpus_sha,
            "synthetic_share": synthetic_share,
            "profile": {},
            "slot_accuracy": {},
        }
        for name in names:
            figure = find_figure(subjects[candidate], name) if ran and candidate else None
            if figure is None:
                reason = (
                    f"no candidate declares baseline {key!r}"
                    + (" (baselines 1-3 run through a proxy adapter)" if tier == "proxy" else "")
                    if candidate is None
                    else f"{candidate} has no {name} figure (no applicable trial)"
                )
                figure = not_run_figure(name, description=f"{description} {label}", reason=reason)
            figures.append(figure.model_copy(update={"name": f"{key}: {name}"}))
            low, high = bootstrap_bounds(figure)
            entry = {
                "figure": name,
                "status": _status_label(figure),
                "value": figure.estimate if figure.status == "measured" else None,
                "lower": low,
                "upper": high,
            }
            if name.startswith("slot_accuracy["):
                row["slot_accuracy"][name[len("slot_accuracy[") : -1]] = entry
            elif name not in axis_of:  # raw G: reported beside its axis, not as it
                row[name], row[f"{name}_interval"] = entry["value"], [low, high]
            else:
                row["profile"][axis_of[name]] = entry
        for name in ("G_star", "balanced_accuracy"):  # flat keys for readers of the record
            got = (row["profile"].get(axis_of.get(name, "")) or {}) if name in axis_of else {}
            row[name] = got.get("value")
            row[f"{name}_interval"] = [got.get("lower"), got.get("upper")]
        row.setdefault("G", None)  # raw G (set above when the governance measure ran)
        rows.append(row)
    share = "unknown" if synthetic_share is None else f"{synthetic_share:.0%}"
    block = FiguresBlock(
        title="Baselines (spec §4: run all of them, always)",
        figures=figures,
        note="Per baseline, each axis's headline with its 95% interval, and slot accuracy "
        "beside G (is the stated r even right?). Instruct, CoT-prompted and CoT-supervised "
        "finetune run through a proxy adapter; the Trace-AI ablation and full models through "
        "the native adapter. A candidate fills a baseline row by its adapter id "
        f"(`proxy:` prefix allowed) or `settings.baseline`. {TRB_VERSION}; corpus sha256 "
        f"{corpus_sha}; synthetic counterfactual share {share}. Every figure's description "
        "names its adapter tier.",
        folded=True,
    )
    return rows, block


def profile_flags(
    candidates: list[str],
    subjects: dict[str, list[Figure]],
    corpus: LoadedCorpus,
    collected: Collected,
    checks: list[dict[str, Any]],
    measures: list[TrbMeasure],
) -> list[str]:
    """Flags a reader must see: provenance, ungoverned adapters, transfer drops, failures."""
    flags = _provenance_flags(corpus)
    oracle = next((c for c in candidates if collected.adapters.get(c) == REFERENCE_ORACLE), None)
    for candidate in candidates:
        figures = subjects[candidate]
        g, floor = measured_estimate(figures, "G"), measured_estimate(figures, "G_null_edit_floor")
        if g is not None and floor is not None and g <= floor:
            flags.append(
                f"{candidate}: G {g:.3f} is at or below its null-edit floor {floor:.3f} (the G "
                "it would score ignoring every edit): its r does not govern its action"
            )
        flags += governance_flags(candidate, figures)  # Track 1 G* and Track 1b (issue 16)
        flags += paired_data_flags(candidate, figures)  # human Phi / sessions (issue 32)
        flags += _retention_flags(candidate, figures)
        flags += viability_flags(candidate, figures)
        flags += transfer_drop_flags(
            candidate, figures, oracle, subjects.get(oracle or "", []), measures
        )
        flags += g_below_eval(candidate, figures, subjects.get(oracle or "", []))
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


def _provenance_flags(corpus: LoadedCorpus) -> list[str]:
    """The corpus's synthetic share against the 3:1 cap, as a whole and per split."""
    flags: list[str] = []
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
        if (label := over_cap_label(share)) is not None:
            flags.append(f"corpus {label}")
    for split, traces in sorted(corpus.splits.items()):  # the cap per split, too
        part = provenance_share(traces)
        if part.cap_status == "violated":
            flags.append(
                f"split {split} is OVER the 3:1 synthetic:human cap ({part.synthetic} synthetic, "
                f"{part.human} human counterfactuals)"
            )
    return flags


def _retention_flags(candidate: str, figures: list[Figure]) -> list[str]:
    """A viability retention ratio below 1: acting through its r costs task completion."""
    viab = find_figure(figures, "completion_retention_ratio")
    below = viab is not None and viab.status == "measured" and (viab.estimate or 1.0) < 1
    if viab is not None and below:
        _, high = bootstrap_bounds(viab)
        return [
            f"{candidate}: viability retention ratio {viab.estimate:.3f} < 1"
            + (" (interval below 1)" if high is not None and high < 1 else "")
            + ": acting through its r degrades task completion (spec Track 4)"
        ]
    return []


REFERENCE_ORACLE = "oracle:perfectly-governed"
"""The oracle whose own transfer drop is the yardstick of every adapter's drop."""


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
    corpus: LoadedCorpus,
    measures: list[TrbMeasure],
    options: TrbTrackOptions,
    k: int,
    seeds: dict[str, Any] | None = None,
) -> list[str]:
    """What these results do not establish (shown at the end of the report).

    `seeds` is the governance gap's seed record: a run without seed replicas says that
    Delta_gov rests on one training seed per model.
    """
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
    if (label := over_cap_label(corpus.manifest.provenance)) is not None:
        out.append(
            f"The corpus is {label} (the spec caps synthetic counterfactuals at 3:1 and asks "
            "for their share)."
        )
    if missing:
        out.append(f"Not run in this experiment: {', '.join(missing)}; their axes are 'not run'.")
    contexts = [s for s in options.splits if s != "eval"]
    if contexts:
        out.append(
            f"The transfer contexts ({', '.join(contexts)}) hold held-out world parameters "
            "generated by the benchmark authors, so Track 6 "
            "here (each track's minimum over the run's transfer contexts and its drop from "
            "eval) checks the machinery, not the spec's transfer criterion, which needs "
            "contexts collected by a party that did not train the model"
            + (
                "; with one transfer context the minimum is over one context."
                if len(contexts) == 1
                else "."
            )
        )
    out.append(
        f"Intervals treat the trace as the independent unit (K = {k} trial(s) per trace and "
        "adapter; adapters are deterministic under their seed). Each trial's adapter hook "
        "calls are recorded as one batch attempt (`adapter.hooks`)."
    )
    if options.max_traces is not None:
        out.append(f"Only the first {options.max_traces} traces of each split were used.")
    if seeds is not None and seeds.get("status") != "run" and seeds.get("reason"):
        out.append(f"Delta_gov's seed-and-trace interval is not run: {seeds['reason']}.")
    return out
