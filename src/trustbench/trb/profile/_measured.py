"""The library's profile vector, computed by the track's code (`trb.track._profile_core`).

`run_reference` (with a `ProfileConfig`) hands its five baselines to `library_profile`, which
builds each through the track's `AdapterSource` and runs the registered measures the config
lists (`ProfileConfig.measures`, the track's default six) on the corpus's eval and transfer
splits, one trial per trace, exactly as a `trb/profile` run would. The baselines table's
`profile` entry and plot are that vector, and Tracks 2, 4, 5 and 6 under `tracks` are its
figures: there is no second, whole-split implementation of those tracks.
"""

from __future__ import annotations

from typing import Any

from trustbench.trb.corpus._format import HELD_OUT, CorpusManifest, Trace

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
    from trustbench.trb.proxy._slots import SLOT_ENCODINGS, STANDARD
    from trustbench.trb.track._measures import StatsPlan
    from trustbench.trb.track._profile_core import measured_profile

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
