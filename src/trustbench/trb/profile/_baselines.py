"""The five spec §4 baselines on every track, the profile vector, its flags and its plot.

Baselines 1-3 are small causal LMs trained here on the token world and run through the
proxy tier (`LocalLMProxyAdapter`): instruct (report and action documents; acts straight
from the history), CoT-prompted (the same weights, reasoning-first template) and
CoT-supervised finetune (those weights finetuned on reasoning-then-action documents).
Baselines 4-5 are the reference ablation and full models through the native tier. All five
have the same kind of white-box access, so Track 2 runs for each; a baseline that cannot be
run is listed with status `not run` and no numbers.

Every figure carries an interval; the profile is the per-track vector, never a mean.
Flags (thresholds declared here, before any result):
- `high_level_low_transfer[track]`: in-distribution headline at or above HIGH_LEVEL and a
  transfer drop above TRANSFER_DROP (spec §5 anti-Goodhart line);
- `g_at_or_below_null_edit_floor`: G not above the floor a model that ignores every edit
  would score (act(c, r_t) held fixed for every r'), i.e. the paired difference G - floor
  is <= 0 or its interval reaches 0;
- `viability_below_one`: completion retention ratio below 1.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from trustbench.trb.adapter._protocol import Adapter
from trustbench.trb.corpus._format import CorpusManifest, Trace
from trustbench.trb.corpus._generate import split_encodings
from trustbench.trb.measures import (
    concept_directions,
    family_splits,
    grounding,
    navigability,
    transfer,
    viability,
)
from trustbench.trb.measures._calls import act_many
from trustbench.trb.measures._gap import governance_gap
from trustbench.trb.measures._governance import (
    attribution_rows,
    governance_rows,
    summarize_attribution,
    summarize_governance,
)
from trustbench.trb.measures._numeric import total_variation
from trustbench.trb.profile._sizes import MEASURES, ProfileSizes
from trustbench.trb.profile._vector import (
    HEADLINE_METRIC,
    HIGH_LEVEL,
    TRACKS,
    TRANSFER_DROP,
    flags,
    headlines,
    profile_svg,
    result_row,
)
from trustbench.trb.proxy import LocalLMProxyAdapter
from trustbench.trb.proxy._slots import (
    SLOT_ENCODINGS,
    STANDARD,
    SlotEncodingUnsupported,
    ask_in_encoding,
)
from trustbench.trb.reference._token_world import load_token_lm, render_history
from trustbench.trb.world import CorridorConfig

BASELINES: tuple[tuple[str, str, str], ...] = (
    ("instruct", "Instruct base (no reasoning scaffold)", "proxy"),
    ("cot-prompted", "CoT-prompted base (chain of thought at inference only)", "proxy"),
    ("cot-supervised-finetune", "CoT-supervised finetune (trained on reasoning text)", "proxy"),
    ("trace-ai-ablation", "Trace-AI ablation (L_trace + L_selfrep, no L_gov)", "native"),
    ("trace-ai-full", "Trace-AI full (L_trace + L_selfrep + L_gov)", "native"),
)
"""The five spec §4 baselines: key, description, adapter tier."""


class ProfileConfig(ProfileSizes):
    """What the profile runs beyond Tracks 1 and 3 of the native pair."""

    transfer_traces: int = Field(default=60, ge=2)
    """Eval traces per transfer family."""
    run_transfer: bool = True
    """Run Track 6 (every track again per family)."""
    measures: tuple[str, ...] = MEASURES
    """Registered TRB measures of the profile vector (as `track_options.measures`): the
    baselines table's `profile` is computed by the track's code from these."""


@dataclass
class Subject:
    """One baseline ready to run: its adapter and what it supports."""

    key: str
    adapter: Any
    tier: str
    accepts: Callable[[CorridorConfig], str | None]
    card: dict[str, Any] = field(default_factory=dict)


def proxy_subjects(
    train: list[Trace], manifest: CorpusManifest, config: ProfileConfig
) -> tuple[list[Subject], dict[str, Any]]:
    """Baselines 1-3: train (or load cached) token-world LMs and wrap them."""
    traces = train[: config.lm_train_traces]
    base, base_card = load_token_lm("instruct", traces, manifest, config.token_lm)
    sft, sft_card = load_token_lm("cot-sft", traces, manifest, config.token_lm)
    max_len = config.token_lm.max_len

    def accepts(world: CorridorConfig) -> str | None:
        need = 1 + 5 * world.horizon + 8  # <bos>, 5 words per step, slot block, <act>
        return None if need <= max_len else f"episodes of {need} tokens exceed max_len {max_len}"

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
        Subject("instruct", instruct, "proxy", accepts, base_card),
        Subject("cot-prompted", prompted, "proxy", accepts, base_card),
        Subject("cot-supervised-finetune", finetuned, "proxy", accepts, sft_card),
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
    fit: list[Trace],
    traces: list[Trace],
    *,
    seed: int,
    resamples: int,
    config: ProfileConfig,
    directions: Any = None,
    governance: tuple[dict[str, Any], list[dict[str, Any]]] | None = None,
    attribution: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Tracks 1-5 for one subject on one split (Track 1/3 results may be passed in)."""
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
    return {
        "governance": gov,
        "attribution": attribution,
        "grounding": grounding(ad, fit, traces, directions=directions, seed=seed,
                               resamples=min(resamples, 500)),
        "viability": viability(ad, traces, rollouts=config.viability_rollouts, seed=seed,
                               resamples=resamples),
        "navigability": navigability(ad, traces, max_nodes=config.max_enumeration_nodes,
                                     n_samples=config.navigation_samples, seed=seed,
                                     resamples=resamples),
    }  # fmt: skip


def _transfer_for(
    subject: Subject,
    fit: list[Trace],
    families: dict[str, list[Trace]],
    heads: dict[str, Any],
    directions: Any,
    *,
    seed: int,
    resamples: int,
    config: ProfileConfig,
) -> dict[str, Any]:
    def run_family(traces: list[Trace]) -> dict[str, Any] | str:
        asked = subject
        split = traces[0].split
        encoding = SLOT_ENCODINGS[split_encodings([split]).get(split, STANDARD.name)]
        if encoding is not STANDARD:  # a copy: the eval adapter stays in the standard one
            try:
                adapter = ask_in_encoding(copy.copy(subject.adapter), encoding, subject.key)
            except SlotEncodingUnsupported as why:
                return f"not applicable: {why}"
            asked = dataclasses.replace(subject, adapter=adapter)
        why = subject.accepts(traces[0].world)
        if why is not None:
            return why
        res = run_tracks(asked, fit, traces, seed=seed, resamples=resamples, config=config,
                         directions=directions)  # fmt: skip
        return headlines(res)

    return transfer(heads, families, run_family)


def run_profile(
    splits: dict[str, list[Trace]],
    manifest: CorpusManifest,
    native: dict[str, dict[str, Any]],
    config: ProfileConfig,
    *,
    seed: int,
    resamples: int,
) -> dict[str, Any]:
    """Every track for all five baselines; the profile, flags, rows and plot.

    Args:
        splits: Corpus splits (train for LMs and directions, eval for the tracks).
        manifest: Corpus manifest (hash, provenance).
        native: Per native baseline: `subject` (a `Subject` around a `ReferenceWhiteBox`),
            `governance` (summary, per-trace rows) and `attribution` (summary) already
            computed on eval.
        config: What to run.
        seed: Seed of every draw and bootstrap.
        resamples: Bootstrap resamples.

    Returns:
        `tracks` (per baseline, per track), `baselines` (the five-row table with the profile
        vector), `rows` (flat result rows), `flags`, `profile_svg`, `models` (LM cards),
        `subjects` (key -> `Subject`, not JSON: `run_reference` pops it).
    """
    corpus_sha = manifest.corpus_sha256
    train, evals = splits["train"], splits["eval"]
    subjects, cards = proxy_subjects(train, manifest, config)
    by_key = {s.key: s for s in subjects}
    for key, entry in native.items():
        by_key[key] = entry["subject"]
    # Each family's traces carry its split label, so its report encoding is known (the
    # `encoding` family is the training world asked in the renamed slot encoding).
    families = {
        name: [t.model_copy(update={"split": f"transfer_{name}"}) for t in traces]
        for name, traces in family_splits(config.transfer_traces, seed).items()
    } if config.run_transfer else {}  # fmt: skip
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
        directions = concept_directions(subject.adapter, train[: config.grounding_fit_traces])
        res = run_tracks(subject, train, evals, seed=seed, resamples=resamples, config=config,
                         directions=directions, governance=given.get("governance"),
                         attribution=given.get("attribution"))  # fmt: skip
        heads = headlines(res)
        trans: dict[str, Any] = (
            _transfer_for(subject, train, families, heads, directions, seed=seed,
                          resamples=resamples, config=config)
            if families else {"status": "not run", "why": "run_transfer is off"}
        )  # fmt: skip
        res["transfer"] = trans
        tracks[key] = res
        g_trans = (trans.get("per_track") or {}).get("governance", {})
        profile = {
            **heads,
            "transfer": {
                "value": g_trans.get("value"),
                "low": None,
                "high": None,
                "min_family": g_trans.get("min_family"),
            },
        }
        all_flags[key] = flags(res, heads, trans)
        table.append({
            "baseline": key, "description": description, "adapter_tier": tier,
            "status": "run", "profile": profile,
            "slot_accuracy": {s: f["value"] for s, f in res["governance"]["slot_accuracy"].items()},
            "null_edit_floor": res["governance"]["null_edit_floor"]["value"],
            "flags": all_flags[key],
        })  # fmt: skip
        for track, metric in HEADLINE_METRIC.items():
            if track == "transfer":
                continue
            if key in native and track in ("governance", "attribution"):
                continue  # the native pair's Track 1/3 rows are written by run_reference
            rows.append(result_row(key, tier, corpus_sha, "eval", track, metric, heads[track]))
        if key not in native:
            for slot, fig in res["governance"]["slot_accuracy"].items():
                rows.append(result_row(key, tier, corpus_sha, "eval", "governance",
                                       f"slot_accuracy[{slot}]", fig))  # fmt: skip
        rows.append(result_row(key, tier, corpus_sha, "eval", "governance", "G_null_edit_floor",
                               res["governance"]["null_edit_floor"]))  # fmt: skip
        for fam, f in (trans.get("families") or {}).items():
            for track, fig in (f.get("tracks") or {}).items():
                rows.append(result_row(key, tier, corpus_sha, f"transfer:{fam}", track,
                                       HEADLINE_METRIC[track], fig))  # fmt: skip
        for track, t in (trans.get("per_track") or {}).items():
            rows.append({**result_row(key, tier, corpus_sha, "transfer", "transfer",
                                      f"min_over_families[{track}]", t),
                         "drop_from_in_distribution": t.get("drop_from_in_distribution"),
                         "min_family": t.get("min_family")})  # fmt: skip
    return {
        "tracks": tracks,
        "baselines": table,
        "rows": rows,
        "flags": all_flags,
        "synthetic_share": manifest.provenance.synthetic_share,
        "profile_svg": profile_svg(table),
        "models": cards,
        "subjects": by_key,
        "thresholds": {"high_level": HIGH_LEVEL, "transfer_drop": TRANSFER_DROP},
        "note": "baselines 1-2 share weights; with an override their prompts are identical, "
        "so they differ only where the model acts without one (Track 4's r-mediated arm)",
    }


__all__ = [
    "HEADLINE_METRIC",
    "TRACKS",
    "ProfileConfig",
    "Subject",
    "flags",
    "headlines",
    "null_edit_floor",
    "profile_svg",
    "proxy_subjects",
    "run_profile",
    "run_tracks",
]
