"""The five spec §4 baselines on every track, the profile vector, its flags and its plot.

Baselines 1-3 are small causal LMs trained here on the token world and run through the
proxy tier (`LocalLMProxyAdapter`): instruct (report and action documents; acts straight
from the history), CoT-prompted (the same weights, reasoning-first template) and
CoT-supervised finetune (those weights finetuned on reasoning-then-action documents).
Baselines 4-5 are the reference ablation and full models through the native tier. All five
have the same kind of white-box access, so Track 2 runs for each; a baseline that cannot be
run is listed with status `not run` and no numbers.

Tracks 2, 4, 5 and 6 are the registered measures of the `trb/profile` track, run by the
track's own code on the corpus's eval and transfer splits (`_measured.measured_vectors`), so
a figure here is the number a `trb run` reports; Tracks 1 and 3 of the whole eval split (with
the null-edit floor) are summarised beside them. Every figure carries an interval; the profile
is the per-track vector, never a mean. Flags (thresholds declared in `_vector`, before any
result):
- `high_level_low_transfer[track]`: in-distribution headline at or above HIGH_LEVEL and a
  transfer drop above TRANSFER_DROP (spec §5 anti-Goodhart line);
- `g_at_or_below_null_edit_floor`: G not above the floor a model that ignores every edit
  would score (act(c, r_t) held fixed for every r'), i.e. the paired difference G - floor
  is <= 0 or its interval reaches 0;
- `viability_below_one`: completion retention ratio below 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trustbench.trb.adapter._protocol import Adapter
from trustbench.trb.corpus._format import CorpusManifest, Trace
from trustbench.trb.measures._calls import act_many
from trustbench.trb.measures._gap import governance_gap
from trustbench.trb.measures._governance import (
    attribution_rows,
    governance_rows,
    summarize_attribution,
    summarize_governance,
)
from trustbench.trb.measures._numeric import total_variation
from trustbench.trb.profile._measured import as_tracks, measured_vectors
from trustbench.trb.profile._sizes import MEASURES, ProfileSizes
from trustbench.trb.profile._vector import (
    BASELINES,
    HEADLINE_METRIC,
    HIGH_LEVEL,
    TRACKS,
    TRANSFER_DROP,
    flags,
    profile_svg,
    result_row,
    transfer_summary,
)
from trustbench.trb.proxy import LocalLMProxyAdapter
from trustbench.trb.reference._token_world import load_token_lm, render_history


class ProfileConfig(ProfileSizes):
    """What the profile runs beyond Tracks 1 and 3 of the native pair."""

    run_transfer: bool = True
    """Run Track 6 (every track again on each of the corpus's transfer splits)."""
    measures: tuple[str, ...] = MEASURES
    """Registered TRB measures of the profile vector (as `track_options.measures`): the
    baselines table's `profile` is computed by the track's code from these."""


@dataclass
class Subject:
    """One baseline ready to run: its adapter and what it supports."""

    key: str
    adapter: Any
    tier: str
    card: dict[str, Any] = field(default_factory=dict)


def proxy_subjects(
    train: list[Trace], manifest: CorpusManifest, config: ProfileConfig
) -> tuple[list[Subject], dict[str, Any]]:
    """Baselines 1-3: train (or load cached) token-world LMs and wrap them."""
    traces = train[: config.lm_train_traces]
    base, base_card = load_token_lm("instruct", traces, manifest, config.token_lm)
    sft, sft_card = load_token_lm("cot-sft", traces, manifest, config.token_lm)
    instruct = LocalLMProxyAdapter.from_folder(base, "instruct", render_history, "direct")
    # Baseline 2 is the same weights with a reasoning-first template; it shares the model
    # and the cache of template-independent results (reports, overridden actions).
    prompted = LocalLMProxyAdapter(
        instruct.model, instruct.tokenizer, "cot-prompted", render_history,
        "reasoning-first", memo=instruct.memo,
    )  # fmt: skip
    finetuned = LocalLMProxyAdapter.from_folder(
        sft, "cot-supervised-finetune", render_history, "reasoning-first"
    )
    subjects = [
        Subject("instruct", instruct, "proxy", base_card),
        Subject("cot-prompted", prompted, "proxy", base_card),
        Subject("cot-supervised-finetune", finetuned, "proxy", sft_card),
    ]
    return subjects, {"instruct": base_card, "cot-supervised-finetune": sft_card}


def null_edit_floor(adapter: Adapter, traces: Sequence[Trace]) -> list[float]:
    """Per-trace summed TV a model that ignores every edit would score (see module doc).

    For each step, act(c, r_t) is held fixed for every stored r' and compared with Phi(r');
    a failed call scores TV 1, as in Track 1.
    """
    out = []
    for trace in traces:
        contexts = [trace.context(s.t) for s in trace.steps]
        nulls = act_many(adapter, contexts, [s.r for s in trace.steps])
        tv = 0.0
        for step, null in zip(trace.steps, nulls, strict=True):
            for cf in step.counterfactuals:
                tv += 1.0 if null is None else total_variation(null, cf.continuation)
        out.append(tv)
    return out


def run_tracks(
    subject: Subject,
    traces: list[Trace],
    *,
    seed: int,
    resamples: int,
    governance: tuple[dict[str, Any], list[dict[str, Any]]] | None = None,
    attribution: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Tracks 1 and 3 for one subject on one split, with the null-edit floor (may be passed in)."""
    ad = subject.adapter
    if governance is None:
        gov_rows = governance_rows(ad, traces)
        governance = (summarize_governance(gov_rows, seed=seed, resamples=resamples), gov_rows)
    gov, gov_rows = governance
    if attribution is None:
        attribution = summarize_attribution(
            attribution_rows(ad, traces), seed=seed, resamples=resamples
        )
    floor = null_edit_floor(ad, traces)
    vs_floor = governance_gap(
        [r["tv_sum"] for r in gov_rows], floor, [r["n_items"] for r in gov_rows],
        seed=seed, resamples=resamples,
    )  # fmt: skip
    n_items = sum(r["n_items"] for r in gov_rows)
    gov = {**gov, "null_edit_floor": {
        "value": 1 - sum(floor) / n_items if n_items else None,
        "G_minus_floor": {k: vs_floor[k] for k in ("estimate", "low", "high", "sign_flip_p")},
        "definition": "G of a model that ignores every edit: act(c, r_t) held for every r'",
    }}  # fmt: skip
    return {"governance": gov, "attribution": attribution}


def run_profile(
    splits: dict[str, list[Trace]],
    manifest: CorpusManifest,
    native: dict[str, dict[str, Any]],
    config: ProfileConfig,
    *,
    models: dict[str, Any],
    seed: int,
    resamples: int,
) -> dict[str, Any]:
    """Every track for all five baselines; the profile, flags, rows and plot.

    Args:
        splits: Corpus splits (train for LMs and fitting, eval and transfer as cases).
        manifest: Corpus manifest (hash, provenance, report encodings).
        native: Per native baseline: `subject` (a `Subject` around a `ReferenceWhiteBox`),
            `governance` (summary, per-trace rows) and `attribution` (summary) already
            computed on eval.
        models: The native baselines' models, by key (the track builds their adapters).
        config: What to run.
        seed: Seed of every draw and bootstrap.
        resamples: Bootstrap resamples.

    Returns:
        `tracks` (per baseline: Tracks 1 and 3, then each other track's profile entry and
        `figures`, every figure of the track's measures), `baselines` (the five-row table with
        the profile vector), `rows` (flat result rows), `flags`, `profile_svg`, `models` (LM
        cards).
    """
    corpus_sha = manifest.corpus_sha256
    subjects, cards = proxy_subjects(splits["train"], manifest, config)
    by_key = {s.key: s for s in subjects}
    for key, entry in native.items():
        by_key[key] = entry["subject"]
    cases = splits if config.run_transfer else {s: splits[s] for s in ("train", "eval")}
    measured = measured_vectors(
        cases, manifest, config, by_key, models, seed=seed, resamples=resamples
    )
    tracks: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    table: list[dict[str, Any]] = []
    all_flags: dict[str, Any] = {}
    for key, description, tier in BASELINES:
        subject = by_key.get(key)
        if subject is None:
            table.append({"baseline": key, "description": description, "adapter_tier": tier,
                          "status": "not run", "profile": {t: None for t in TRACKS}})  # fmt: skip
            continue
        given = native.get(key, {})
        res = run_tracks(subject, splits["eval"], seed=seed, resamples=resamples,
                         governance=given.get("governance"),
                         attribution=given.get("attribution"))  # fmt: skip
        figures = measured["figures"][key]
        heads = as_tracks(measured["profile"][key])
        trans = transfer_summary(figures, heads)
        res.update({track: heads[track] for track in ("grounding", "viability", "navigability")})
        res["transfer"] = trans
        res["figures"] = [f.model_dump(mode="json") for f in figures]
        tracks[key] = res
        all_flags[key] = flags(res, heads, trans)
        table.append({
            "baseline": key, "description": description, "adapter_tier": tier,
            "status": "run", "profile": heads,
            "slot_accuracy": {s: f["value"] for s, f in res["governance"]["slot_accuracy"].items()},
            "null_edit_floor": res["governance"]["null_edit_floor"]["value"],
            "flags": all_flags[key],
        })  # fmt: skip
        rows += _rows(key, tier, corpus_sha, res, heads, trans, native=key in native)
    return {
        "tracks": tracks,
        "baselines": table,
        "rows": rows,
        "flags": all_flags,
        "synthetic_share": manifest.provenance.synthetic_share,
        "profile_svg": profile_svg(table),
        "models": cards,
        "vectors": measured["profile"],
        "thresholds": {"high_level": HIGH_LEVEL, "transfer_drop": TRANSFER_DROP},
        "note": "baselines 1-2 share weights; with an override their prompts are identical, "
        "so they differ only where the model acts without one (Track 4's r-mediated arm)",
    }


def _rows(
    key: str,
    tier: str,
    corpus_sha: str,
    res: dict[str, Any],
    heads: dict[str, Any],
    trans: dict[str, Any],
    *,
    native: bool,
) -> list[dict[str, Any]]:
    """One baseline's flat result rows: headlines, slot accuracy, the floor, transfer."""
    rows: list[dict[str, Any]] = []
    for track, head in heads.items():
        if track == "transfer" or (native and track in ("governance", "attribution")):
            continue  # the native pair's Track 1/3 rows are written by run_reference
        rows.append(result_row(key, tier, corpus_sha, "eval", track, head["figure"], head))
    if not native:
        for slot, fig in res["governance"]["slot_accuracy"].items():
            rows.append(result_row(key, tier, corpus_sha, "eval", "governance",
                                   f"slot_accuracy[{slot}]", fig))  # fmt: skip
    rows.append(result_row(key, tier, corpus_sha, "eval", "governance", "G_null_edit_floor",
                           res["governance"]["null_edit_floor"]))  # fmt: skip
    for track, t in trans["per_track"].items():
        rows.append({**result_row(key, tier, corpus_sha, "transfer", "transfer",
                                  f"min_over_contexts[{heads[track]['figure']}]", t),
                     "drop_from_in_distribution": t.get("drop_from_in_distribution"),
                     "min_context": t.get("min_context")})  # fmt: skip
    return rows


__all__ = [
    "HEADLINE_METRIC",
    "TRACKS",
    "ProfileConfig",
    "Subject",
    "flags",
    "null_edit_floor",
    "profile_svg",
    "proxy_subjects",
    "run_profile",
    "run_tracks",
]
