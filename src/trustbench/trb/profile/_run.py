"""A TRB run on the reference world: corpus -> reference pair -> Tracks 1 & 3 -> gap -> rows.

Everything returned is plain JSON-serialisable data: per-trace rows, summary figures with
numerators, denominators and intervals, the governance gap, the five-baseline table and flat
result rows that each carry `TRB v1.0`, the corpus hash and the adapter tier, ready for the
shared ledger and report.

Honesty label: every counterfactual here is a synthetic edit and every continuation comes
from the exact reference agent, so these are reference-world results (a harness check and a
demonstration that L_gov matters in a controlled world), not a TRB score (spec §6: no score
until Tracks 1 and 3 have real paired human data).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from trustbench._docstrings import documented
from trustbench.errors import CheckFailed, InputError
from trustbench.trb.adapter._protocol import TRB_VERSION, Adapter
from trustbench.trb.corpus._format import HELD_OUT, CorpusManifest, Trace
from trustbench.trb.corpus._generate import generate_reference_corpus
from trustbench.trb.corpus._store import manifest_for, manifest_world, read_corpus
from trustbench.trb.instruments._oracles import audit
from trustbench.trb.measures import ReferenceWhiteBox
from trustbench.trb.measures._governance import (
    act_many,
    attribution_rows,
    governance_gap,
    governance_rows,
    summarize_attribution,
    summarize_governance,
    total_variation,
)
from trustbench.trb.profile._vector import (
    BASELINES,
    HEADLINE_METRIC,
    HIGH_LEVEL,
    MEASURES,
    TRACKS,
    TRANSFER_DROP,
    ProfileSizes,
    flags,
    profile_svg,
    result_row,
    transfer_summary,
)
from trustbench.trb.proxy import LocalLMProxyAdapter
from trustbench.trb.reference import NativeModelAdapter, TrainConfig, load_reference_model
from trustbench.trb.reference._token_world import TokenLMConfig, load_token_lm, render_history
from trustbench.trb.world import CorridorConfig

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


# ------------------------------------------------------------------------------------------------
# The library's profile vector, computed by the track's code (`trb.track._profile`).
#
# `run_reference` (with a `ProfileConfig`) hands its five baselines to `library_profile`, which
# builds each through the track's `AdapterSource` and runs the registered measures the config
# lists (`ProfileConfig.measures`, the track's default six) on the corpus's eval and transfer
# splits, one trial per trace, exactly as a `trb/profile` run would. The baselines table's
# `profile` entry and plot are that vector, and Tracks 2, 4, 5 and 6 under `tracks` are its
# figures: there is no second, whole-split implementation of those tracks.

AXIS_TRACK: dict[str, str] = {
    "G": "governance",
    "ground": "grounding",
    "attr": "attribution",
    "viab": "viability",
    "nav": "navigability",
    "trans": "transfer",
}
"""The library's track name for each profile axis (`trb.profile._vector.TRACKS`)."""


def transfer_contexts(splits: dict[str, list[Trace]]) -> dict[str, list[Trace]]:
    """The corpus's non-empty transfer splits.

    One per family (`TRANSFER_FAMILY_SPLITS`), or the single `transfer` split of an older
    corpus folder (both, if a folder holds both).
    """
    return {s: splits[s] for s in HELD_OUT if s != "eval" and splits.get(s)}


def library_profile(
    splits: dict[str, list[Trace]],
    manifest: CorpusManifest,
    sources: dict[str, Any],
    *,
    measures: tuple[str, ...],
    settings: dict[str, Any],
    fit_traces: int,
    confidence: float,
    seed: int,
    resamples: int,
) -> dict[str, Any]:
    """Per baseline key, the six-axis profile the track would report, and its figures.

    Args:
        splits: The corpus splits (train for fitting, eval and transfer as cases).
        manifest: Their manifest (hash, report encodings).
        sources: Baseline key -> `AdapterSource` (native ones carry the model).
        measures: Measure keys or `module:attribute` strings.
        settings: Track sizes (`_profile_track.run_settings`' keys).
        fit_traces: Train traces the measures may fit on.
        confidence: Interval level.
        seed: Bootstrap seed.
        resamples: Bootstrap resamples.

    Returns:
        `measured_profile`'s result: `profile` and `figures` per baseline key, `collected`.
    """
    from trustbench.trb.proxy._local import SLOT_ENCODINGS, STANDARD
    from trustbench.trb.track._measures import StatsPlan
    from trustbench.trb.track._profile import measured_profile

    def encoding(split: str) -> Any:
        info = manifest.splits.get(split)
        return SLOT_ENCODINGS[info.report_encoding] if info is not None else STANDARD

    traces = list(splits["eval"])
    for held in transfer_contexts(splits).values():
        traces += held
    builders = {
        key: (lambda trace, s=source: s.build(trace.world, None, encoding(trace.split)))
        for key, source in sources.items()
    }
    return measured_profile(
        builders, traces, measures=measures, stats=StatsPlan(confidence, seed, resamples),
        corpus_sha=manifest.corpus_sha256, fit_traces=splits["train"][:fit_traces],
        settings=settings, seed=0,
        trusted_native=frozenset(k for k, s in sources.items() if s.model is not None),
    )  # fmt: skip


def as_tracks(vector: dict[str, Any]) -> dict[str, Any]:
    """One baseline's axis vector keyed by track name, as the baselines table shows it."""
    return {
        AXIS_TRACK[axis]: {
            "value": entry["value"], "low": entry["lower"], "high": entry["upper"],
            "figure": entry["figure"], "status": entry["status"], "reason": entry["reason"],
        }
        for axis, entry in vector.items()
    }  # fmt: skip


def measured_vectors(
    splits: dict[str, list[Trace]],
    manifest: CorpusManifest,
    config: Any,
    subjects: dict[str, Any],
    models: dict[str, Any],
    *,
    seed: int,
    resamples: int,
) -> dict[str, Any]:
    """The baselines' profiles and figures (`run_profile`'s subjects through `library_profile`).

    Each baseline becomes the track's `AdapterSource`: a native one with its model and the
    train world, a proxy one with its adapter and the LM's `max_len` (`proxy:` id, as the
    track names it).

    Args:
        splits: The corpus splits (the transfer ones are the Track 6 contexts).
        manifest: Their manifest.
        config: The `ProfileConfig` (sizes and measures).
        subjects: Baseline key -> `Subject`.
        models: The native baselines' models, by key.
        seed: Bootstrap seed.
        resamples: Bootstrap resamples.
    """
    from trustbench.trb.track._adapters import AdapterSource

    world = splits["train"][0].world
    max_len = config.token_lm.max_len
    sources = {
        key: AdapterSource(key, model=models[key], trained_world=world, prototype=s.adapter)
        if key in models
        else AdapterSource(f"proxy:{key}", prototype=s.adapter, max_len=max_len)
        for key, s in subjects.items()
    }
    settings = {"viability_rollouts": config.viability_rollouts, "navigation_samples":
                config.navigation_samples, "max_enumeration_nodes":
                config.max_enumeration_nodes}  # fmt: skip
    return library_profile(
        splits, manifest, sources, measures=config.measures, settings=settings,
        fit_traces=config.grounding_fit_traces, confidence=0.95, seed=seed, resamples=resamples,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------
# The five spec §4 baselines on every track, the profile vector, its flags and its plot.
#
# Baselines 1-3 are small causal LMs trained here on the token world and run through the
# proxy tier (`LocalLMProxyAdapter`): instruct (report and action documents; acts straight
# from the history), CoT-prompted (the same weights, reasoning-first template) and
# CoT-supervised finetune (those weights finetuned on reasoning-then-action documents).
# Baselines 4-5 are the reference ablation and full models through the native tier. All five
# have the same kind of white-box access, so Track 2 runs for each; a baseline that cannot be
# run is listed with status `not run` and no numbers.
#
# Tracks 2, 4, 5 and 6 are the registered measures of the `trb/profile` track, run by the
# track's own code on the corpus's eval and transfer splits (`_measured.measured_vectors`), so
# a figure here is the number a `trb run` reports; Tracks 1 and 3 of the whole eval split (with
# the null-edit floor) are summarised beside them. Every figure carries an interval; the profile
# is the per-track vector, never a mean. Flags (thresholds declared in `_vector`, before any
# result):
# - `high_level_low_transfer[track]`: in-distribution headline at or above HIGH_LEVEL and a
#   transfer drop above TRANSFER_DROP (spec §5 anti-Goodhart line);
# - `g_at_or_below_null_edit_floor`: G not above the floor a model that ignores every edit
#   would score (act(c, r_t) held fixed for every r'), i.e. the paired difference G - floor
#   is <= 0 or its interval reaches 0;
# - `viability_below_one`: completion retention ratio below 1.


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


REFERENCE_LABEL = (
    "reference-world results: synthetic counterfactuals with reference-agent continuations "
    "computed from the exact world; 0 human counterfactuals, so the 3:1 synthetic:human cap "
    "is not met and this is not a TRB score"
)


class RunConfig(BaseModel):
    """What a reference-world TRB run does; the smoke run is a small instance."""

    model_config = documented(extra="forbid", frozen=True)

    sizes: dict[str, int] = Field(
        default_factory=lambda: {"train": 1500, "dev": 200, "eval": 300, "transfer": 200}
    )
    """Traces per split when the corpus is generated."""
    corpus_seed: int = 0
    """Seed of the generated corpus."""
    train: TrainConfig = TrainConfig()
    """Training config shared by the ablation and the full model (only the loss differs)."""
    bootstrap_seed: int = 20260803
    """Seed of every bootstrap and sign-flip draw."""
    resamples: int = Field(default=2000, ge=100)
    """Bootstrap resamples and sign-flip draws."""
    profile: ProfileConfig | None = None
    """Tracks 2, 4, 5, 6 and baselines 1-3 (the full profile); None runs Tracks 1 and 3 of
    the native pair only, and baselines 1-3 are then listed `not run`."""


SMOKE_CONFIG = RunConfig(
    sizes={"train": 800, "dev": 20, "eval": 100, "transfer": 20},
    train=TrainConfig(epochs=60, hidden=48),
    resamples=1000,
)
"""The one-minute smoke run (a few seconds of training per model on one core)."""

PROFILE_SMOKE_CONFIG = SMOKE_CONFIG.model_copy(
    update={
        "profile": ProfileConfig(
            token_lm=TokenLMConfig(d_model=32, epochs=4, finetune_epochs=3),
            lm_train_traces=300,
            grounding_fit_traces=60,
            viability_rollouts=2,
            navigation_samples=8,
        )
    }
)
"""The smoke run plus the full profile at small sizes: all six tracks, all five baselines
(about a minute and a half on one free core the first time, most of it training the three
small LMs; cached models make reruns faster)."""

FULL_CONFIG = RunConfig(profile=ProfileConfig())
"""The full reference run with the complete profile: all six tracks, all five baselines."""


def _row(
    adapter: str, tier: str, corpus_sha: str, track: str, metric: str, fig: dict[str, Any]
) -> dict[str, Any]:
    """`result_row` on the eval split; a figure's `items` stands in for a missing denominator."""
    denominator = fig.get("denominator", fig.get("items"))
    return result_row(
        adapter, tier, corpus_sha, "eval", track, metric, {**fig, "denominator": denominator}
    )


def _transfer_governance(
    adapter: NativeModelAdapter,
    contexts: dict[str, list[Trace]],
    manifest: CorpusManifest,
    world: CorridorConfig,
    eval_governance: dict[str, Any],
    seed: int,
) -> dict[str, Any]:
    """Track 1 G per transfer context, its minimum over them and the drop from eval.

    A Track 6 ingredient only (Track 1 alone). A context the native model cannot be asked on
    is "not applicable" with the reason and left out of the minimum, never read as 0: a world
    of another corridor size (its encoder has one), or a split asked in another report
    encoding (text a proxy model reads; a native adapter exchanges `SelfReport` objects).
    """
    per: dict[str, dict[str, Any]] = {}
    for split, traces in contexts.items():
        info = manifest.splits.get(split)
        encoding = info.report_encoding if info is not None else "standard"
        there = traces[0].world
        if (there.length, there.horizon) != (world.length, world.horizon):
            why = (
                f"the native encoder reads corridors of length {world.length} and horizon "
                f"{world.horizon}; this context's world has {there.length}/{there.horizon}"
            )
        elif encoding != "standard":
            why = (
                f"native adapter: the {encoding!r} report encoding is a proxy model's slot "
                "text; hooks exchange SelfReport objects, so it has no meaning here"
            )
        else:
            why = None
        if why is not None:
            per[split] = {"status": "not applicable", "why": why, "G": None,
                          "drop_from_eval": None}  # fmt: skip
            continue
        g = summarize_governance(governance_rows(adapter, traces), seed=seed, resamples=1000)["G"]
        drop = eval_governance["G"]["value"] - g["value"]
        per[split] = {"status": "run", "world": there.model_dump(), "report_encoding": encoding,
                      "G": g, "drop_from_eval": drop}  # fmt: skip
    ran = {s: c for s, c in per.items() if c["status"] == "run"}
    left_out = {s: c["why"] for s, c in per.items() if c["status"] != "run"}
    if not ran:
        why = "the corpus has no transfer split" if not per else "no context applicable"
        return {"status": "not run", "why": why, "contexts": per, "left_out": left_out,
                "G": None, "drop_from_eval": None}  # fmt: skip
    worst = min(ran, key=lambda s: ran[s]["G"]["value"])
    return {
        "status": "run",
        "contexts": per,
        "min_context": worst,
        "G": ran[worst]["G"],
        "drop_from_eval": ran[worst]["drop_from_eval"],
        "left_out": left_out,
        "note": "G is the minimum over the applicable transfer contexts (that context's "
        "interval; the minimum is a selection, no simultaneous interval) and drop_from_eval "
        "is eval G minus it; Track 1 only, on contexts generated by the benchmark, not "
        "collected by a third party",
    }


def _reference_splits(
    config: RunConfig, corpus_dir: Path | None
) -> tuple[CorpusManifest, dict[str, list[Trace]]]:
    """The corpus stored at `corpus_dir`, else one made from `config` (train and eval needed)."""
    if corpus_dir is not None:
        manifest, splits = read_corpus(corpus_dir)
    else:
        generated = generate_reference_corpus(
            config.sizes, seed=config.corpus_seed, transfer_families=True
        )
        splits = {k: v for k, v in generated.items() if v}
        manifest = manifest_for(splits)
    for needed in ("train", "eval"):
        if not splits.get(needed):
            raise InputError(
                f"corpus has no '{needed}' traces; a run needs train and eval splits",
                location=str(corpus_dir or "generated corpus"),
            )
    return manifest, splits


def _model_rows(name: str, corpus_sha: str, track: dict[str, Any]) -> list[dict[str, Any]]:
    """One reference model's flat rows from its tracks: transfer G, G and its parts, attribution."""
    tier, gov, att = track["adapter_tier"], track["governance"], track["attribution"]
    transfer = track["transfer_governance"]
    rows: list[dict[str, Any]] = []
    for split, context in transfer["contexts"].items():
        if context["status"] == "run":
            rows.append({**_row(name, tier, corpus_sha, "governance", "G", context["G"]),
                         "split": split})  # fmt: skip
    if transfer["status"] == "run":
        rows.append({
            **_row(name, tier, corpus_sha, "transfer", "min_over_contexts[G]", transfer["G"]),
            "split": "transfer", "min_context": transfer["min_context"],
            "drop_from_in_distribution": transfer["drop_from_eval"],
        })  # fmt: skip
    rows.append(_row(name, tier, corpus_sha, "governance", "G", gov["G"]))
    for slot, fig in gov["G_per_slot"].items():
        rows.append(_row(name, tier, corpus_sha, "governance", f"G[{slot}]", fig))
    rows.append(_row(name, tier, corpus_sha, "governance", "G_null_edit", gov["G_null_edit"]))
    rows.append(
        _row(
            name, tier, corpus_sha, "governance", "hard_interchange_accuracy",
            gov["hard_interchange_accuracy"],
        )
    )  # fmt: skip
    for slot, fig in gov["slot_accuracy"].items():
        rows.append(_row(name, tier, corpus_sha, "governance", f"slot_accuracy[{slot}]", fig))
    ba = att["balanced_accuracy"]
    rows.append(_row(name, tier, corpus_sha, "attribution", "balanced_accuracy", ba))
    fc = att["false_credit"]
    rows.append(
        _row(
            name, tier, corpus_sha, "attribution", "false_credit_rate",
            {"value": fc["false_credit_rate"], "numerator": fc["claimed_self"],
             "denominator": fc["cells"]},
        )
    )  # fmt: skip
    return rows


def run_reference(
    config: RunConfig | None = None, corpus_dir: Path | None = None
) -> dict[str, Any]:
    """Run Tracks 1 and 3, the governance gap and the oracle audit on the reference pair.

    Args:
        config: Run config (defaults to the full reference run).
        corpus_dir: Read a stored corpus from here instead of generating one.

    Returns:
        A JSON-serialisable result (see module docstring).
    """
    config = config or RunConfig()
    manifest, splits = _reference_splits(config, corpus_dir)
    corpus_sha = manifest.corpus_sha256
    eval_traces = splits["eval"]
    world = eval_traces[0].world
    seed, resamples = config.bootstrap_seed, config.resamples

    tracks: dict[str, Any] = {}
    per_trace: dict[str, Any] = {}
    adapters: dict[str, ReferenceWhiteBox] = {}
    models: dict[str, Any] = {}
    cards: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    for name in ("trace-ai-ablation", "trace-ai-full"):
        model, card = load_reference_model(name, splits["train"], manifest, config.train)
        cards[name], models[name] = card, model
        fit = [t.context(s.t) for t in splits["train"][:200] for s in t.steps]
        adapter = ReferenceWhiteBox(model, name, world.length, world.horizon, fit)
        gov_rows = governance_rows(adapter, eval_traces)
        att_rows = attribution_rows(adapter, eval_traces)
        gov = summarize_governance(gov_rows, seed=seed, resamples=resamples)
        att = summarize_attribution(att_rows, seed=seed, resamples=resamples)
        tracks[name] = {"adapter_tier": adapter.tier.value, "governance": gov, "attribution": att}
        per_trace[name] = {"governance": gov_rows, "attribution": att_rows}
        adapters[name] = adapter
        tracks[name]["transfer_governance"] = _transfer_governance(
            adapter, transfer_contexts(splits), manifest, world, gov, seed
        )
        rows += _model_rows(name, corpus_sha, tracks[name])

    full, abl = (
        per_trace["trace-ai-full"]["governance"],
        per_trace["trace-ai-ablation"]["governance"],
    )
    if [r["trace_id"] for r in full] != [r["trace_id"] for r in abl]:
        raise CheckFailed("governance gap needs both models scored on the same eval traces")
    gap = governance_gap(
        [r["tv_sum"] for r in full],
        [r["tv_sum"] for r in abl],
        [r["n_items"] for r in full],
        seed=seed,
        resamples=resamples,
    )
    gap_record = {
        "trb_version": TRB_VERSION,
        "corpus_sha256": corpus_sha,
        "adapter_tier": "native",
        "split": "eval",
        "metric": "Delta_gov = G(trace-ai-full) - G(trace-ai-ablation)",
        **gap,
        "interval_excludes_zero": gap["low"] is not None and (gap["low"] > 0 or gap["high"] < 0),
        "pass_bar_met": gap["low"] is not None and gap["low"] > 0,
    }
    rows.append(
        {
            **_row("trace-ai-full vs trace-ai-ablation", "native", corpus_sha, "governance",
                   "Delta_gov", {"value": gap["estimate"], "low": gap["low"], "high": gap["high"]}),
            "sign_flip_p": gap["sign_flip_p"],
        }
    )  # fmt: skip

    baselines = []
    for key, description, tier in BASELINES:
        ran = key in tracks
        baselines.append(
            {
                "baseline": key,
                "description": description,
                "adapter_tier": tier,
                "status": "run" if ran else "not run",
                "G": tracks[key]["governance"]["G"]["value"] if ran else None,
                "balanced_accuracy": (
                    tracks[key]["attribution"]["balanced_accuracy"]["value"] if ran else None
                ),
                "trb_version": TRB_VERSION,
                "corpus_sha256": corpus_sha,
            }
        )

    profile = None
    if config.profile is not None:
        profile = _profile(
            splits, manifest, config, tracks, per_trace, adapters, cards, rows, baselines, models
        )
    audit_rows = audit(eval_traces)
    from trustbench.trb.track._versioning import default_metric_digest

    digest = default_metric_digest()  # beside trb_version in every row (trb/track/_versioning)
    world = manifest_world(manifest)  # the corpus's world id and declaration digest
    for row in [*rows, *baselines, gap_record]:
        row["metric_digest"] = digest
        row.update(world)
    return {
        "trb_version": TRB_VERSION,
        "metric_digest": digest,
        **world,
        "label": REFERENCE_LABEL,
        "corpus": {
            "sha256": corpus_sha,
            "kind": manifest.kind,
            "provenance": manifest.provenance.model_dump(),
            "traces": {k: v.n_traces for k, v in manifest.splits.items()},
            "continuation_source": "reference_agent",
        },
        "config": config.model_dump(),
        "models": cards,
        "tracks": tracks,
        "governance_gap": gap_record,
        "baselines": baselines,
        "profile": profile,
        "audit": audit_rows,
        "rows": rows,
        "per_trace": per_trace,
    }


def _profile(
    splits: dict[str, list[Trace]],
    manifest: CorpusManifest,
    config: RunConfig,
    tracks: dict[str, Any],
    per_trace: dict[str, Any],
    adapters: dict[str, ReferenceWhiteBox],
    cards: dict[str, Any],
    rows: list[dict[str, Any]],
    baselines: list[dict[str, Any]],
    models: dict[str, Any],
) -> dict[str, Any]:
    """Run the full profile (Tracks 2, 4, 5, 6; baselines 1-3) and merge it in place.

    Adds, per baseline key in `tracks`: `grounding`, `viability`, `navigability`, `transfer`
    and `figures` (the track's measures' figures; and `governance` / `attribution` for the
    proxy baselines); appends the profile's rows;
    fills each `baselines` entry's `status`, `G`, `balanced_accuracy`, `flags`, and its
    `profile_vector` (and `profile`, the same keyed by track) computed by the track's code.
    """
    assert config.profile is not None
    native = {}
    for name in ("trace-ai-ablation", "trace-ai-full"):
        adapter = adapters[name]
        native[name] = {
            "subject": Subject(name, adapter, "native", cards[name]),
            "governance": (tracks[name]["governance"], per_trace[name]["governance"]),
            "attribution": tracks[name]["attribution"],
        }  # fmt: skip
    profile = run_profile(
        splits, manifest, native, config.profile, models=models,
        seed=config.bootstrap_seed, resamples=config.resamples,
    )  # fmt: skip
    vectors = profile["vectors"]
    for key, res in profile["tracks"].items():
        entry = tracks.setdefault(key, {"adapter_tier": "proxy"})
        entry.update(res)
    rows.extend(profile["rows"])
    cards.update({f"token-lm:{k}": v for k, v in profile["models"].items()})
    by_key = {b["baseline"]: b for b in profile["baselines"]}
    for b in baselines:
        got = by_key.get(b["baseline"], {})
        b["status"] = got.get("status", "not run")
        if b["status"] == "run":
            res = profile["tracks"][b["baseline"]]
            b["G"] = res["governance"]["G"]["value"]
            b["balanced_accuracy"] = res["attribution"]["balanced_accuracy"]["value"]
        for extra in ("flags", "slot_accuracy", "null_edit_floor"):
            b[extra] = got.get(extra)
        b["profile_vector"] = vectors.get(b["baseline"])
        b["profile"] = None if b["profile_vector"] is None else as_tracks(b["profile_vector"])
    out = {k: profile[k] for k in ("flags", "synthetic_share", "thresholds", "note")}
    return {**out, "profile_svg": profile_svg(baselines)}


def smoke_run() -> dict[str, Any]:
    """The one-minute smoke run `trustbench demo` includes (tiny corpus, tiny models)."""
    return run_reference(SMOKE_CONFIG)


def profile_smoke_run() -> dict[str, Any]:
    """The smoke run with the five-baseline, six-track profile (`PROFILE_SMOKE_CONFIG`)."""
    return run_reference(PROFILE_SMOKE_CONFIG)
