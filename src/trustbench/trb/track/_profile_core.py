"""The one code path of the TRB profile: registered measures -> trials -> figures -> vector.

Both entry points compute the profile here, so they cannot drift apart:

- the `trb/profile` track: `run_trial` prepares the adapter (`prepare_adapter`) and runs every
  measure on one trace (`measure_trace`); `analyze` turns the ledger's trials into rows
  (`_collect.add_trial`), figures (`measure_figures`) and the six-axis vector
  (`_summaries.profile_summary`);
- the library (`measured_profile`, called by `trb.profile.run_reference`): the same steps in
  this process, one trial per trace, with no ledger in between.

Nothing names a measure: each loop runs over the measures a run lists (built-in or registered
with `register_measure`, `load_measures` refusing two on one axis), so a measure added from
outside reaches the library profile and the track's record alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trustbench.core.figures import Figure, not_run_figure
from trustbench.trb.adapter._schema import TRB_VERSION
from trustbench.trb.corpus._format import Trace
from trustbench.trb.track._adapters import NotApplicable
from trustbench.trb.track._collect import Collected, add_trial
from trustbench.trb.track._lookup import split_name
from trustbench.trb.track._measures import StatsPlan, TrbMeasure, load_measures
from trustbench.trb.track._recording import RecordingAdapter


def prepare_adapter(
    inner: Any,
    *,
    fit_traces: Sequence[Trace],
    settings: dict[str, Any],
    seed: int,
    blind_key: str | None,
    trusted_native: bool,
) -> RecordingAdapter:
    """Wrap an adapter as every measure sees it: recorded, with the run's sizes and seed."""
    recorder = RecordingAdapter(inner)
    recorder.fit_traces = list(fit_traces)
    recorder.settings = dict(settings)
    recorder.seed_value = seed
    recorder.blind_key = blind_key  # opaque trace ids, per run (None: the corpus ids)
    recorder.trusted_native = trusted_native  # a built-in reference model (harness code)
    return recorder


def measure_trace(
    measures: Sequence[TrbMeasure],
    recorder: RecordingAdapter,
    trace: Trace,
    seed: int,
    skip: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Seed the adapter and run every measured (non-derived) measure on one trace.

    `skip` maps a measure key to why it is not run here (recorded as not applicable).

    Raises:
        NotApplicable: the adapter cannot be asked on this trace; any other exception is the
            adapter's (or a measure's) failure and fails the trial.
    """
    skip = skip or {}
    recorder.seed(seed)
    results: dict[str, Any] = {}
    for measure in measures:
        if getattr(measure, "derived", False):
            continue
        if measure.key in skip:
            results[measure.key] = {"applicable": False, "why": skip[measure.key]}
            continue
        results[measure.key] = measure.run(recorder, trace)
    return results


def _label(corpus_sha: str, tier: str, split: str) -> str:
    return f"[{TRB_VERSION}; corpus sha256 {corpus_sha[:16]}; adapter tier {tier}; {split}]"


def measure_figures(
    collected: Collected,
    candidate: str,
    splits: Sequence[str],
    measures: Sequence[TrbMeasure],
    stats: StatsPlan,
    corpus_sha: str,
) -> tuple[list[Figure], dict[str, list[Figure]]]:
    """One candidate's figures: every measure per split, then the derived ones (Track 6).

    Returns:
        All figures (split-prefixed names off eval) and the figures per split (the derived
        ones added to eval's, as the report shows them).
    """
    tier = collected.tiers.get(candidate, "unknown (not run)")
    figures: list[Figure] = []
    per_split: dict[str, list[Figure]] = {}
    for split in splits:
        label = _label(corpus_sha, tier, f"{split} split")
        made_here: list[Figure] = []
        for measure in measures:
            if getattr(measure, "derived", False):
                continue
            rows = collected.rows.get((candidate, split, measure.key), [])
            made = (
                measure.figures(rows, stats, label)
                if rows
                else [
                    not_run_figure(
                        measure.headline,
                        description=f"{measure.title} {label}",
                        reason=collected.not_run_reason(candidate, split),
                    )
                ]
            )
            made_here += [f.model_copy(update={"name": split_name(split, f.name)}) for f in made]
        per_split[split] = made_here
        figures += made_here
    headlines = [m.headline for m in measures if not getattr(m, "derived", False)]
    by_split = {
        split: [f.model_copy(update={"name": f.name.removeprefix(f"{split}.")}) for f in figs]
        for split, figs in per_split.items()
    }
    eval_label = _label(corpus_sha, tier, "eval vs transfer contexts")
    for measure in measures:
        if getattr(measure, "derived", False):
            derived = measure.derive(by_split, headlines, eval_label)  # type: ignore[attr-defined]
            figures += derived
            if "eval" in per_split:
                per_split["eval"] += derived
    return figures, per_split


AdapterBuilder = Callable[[Trace], Any]
"""Builds (or returns) the adapter a trace is asked through; may raise `NotApplicable`."""


def measured_profile(
    builders: Mapping[str, AdapterBuilder],
    traces: Sequence[Trace],
    *,
    measures: Sequence[str],
    stats: StatsPlan,
    corpus_sha: str,
    fit_traces: Sequence[Trace],
    settings: dict[str, Any],
    seed: int = 0,
    trusted_native: frozenset[str] = frozenset(),
    blind_key: str | None = None,
) -> dict[str, Any]:
    """The library's TRB profile: the track's steps in this process, one trial per trace.

    Args:
        builders: Per candidate, its adapter for a trace (raise `NotApplicable` to refuse).
        traces: The cases (eval and the transfer contexts, each under its split label).
        measures: Measure keys or `module:attribute` strings, as `track_options.measures`.
        stats: Interval settings.
        corpus_sha: The corpus hash every figure names.
        fit_traces: Train traces the measures may fit on (the track's `grounding_fit_traces`).
        settings: Track sizes, as the track sets them (`_profile_track.run_settings`).
        seed: The trial seed (the track's `adapter_seed` with K = 1).
        trusted_native: Candidates that are built-in native models (harness code).
        blind_key: Key of the opaque trace ids adapters are shown (the track uses the frozen
            manifest's SHA-256); None shows the corpus ids.

    Returns:
        `profile` (candidate -> axis -> entry, as the track's record `trb.profile`),
        `figures` (candidate -> figures) and `collected` (the trial accounting).
    """
    from trustbench.trb.track._summaries import profile_summary

    loaded = [m for m, _ in load_measures(list(measures))]
    collected = Collected()
    for candidate, build in builders.items():
        for trace in traces:
            outcome = library_trial(build, trace, loaded, fit_traces, settings, seed,
                                     candidate in trusted_native, blind_key)  # fmt: skip
            add_trial(collected, loaded, candidate, trace, failed=outcome.pop("_failed"),
                      outcome=outcome)  # fmt: skip
    splits = list(dict.fromkeys(t.split for t in traces))
    figures = {
        c: measure_figures(collected, c, splits, loaded, stats, corpus_sha)[0] for c in builders
    }
    profile, _ = profile_summary(list(builders), figures, loaded)
    return {"profile": profile, "figures": figures, "collected": collected}


def split_figures(
    adapter: Any,
    traces: Sequence[Trace],
    measures: Sequence[str],
    *,
    fit_traces: Sequence[Trace] = (),
    settings: dict[str, Any] | None = None,
    stats: StatsPlan | None = None,
    seed: int = 0,
) -> dict[str, Figure]:
    """One adapter's figures of the listed measures over `traces`, by figure name.

    The whole-split view of the per-trace measures: `measured_profile` with one candidate,
    one trial per trace, pooled per split as the report pools it (names split-prefixed off
    eval). Library code that wants one track on one adapter (the Goodhart audit, the tests)
    uses this, so there is no second, whole-split implementation of a track.

    Args:
        adapter: The adapter every trace is asked through.
        traces: The cases.
        measures: Measure keys or `module:attribute` strings.
        fit_traces: Train traces (Track 2's directions, the no-r arm's r marginal).
        settings: Track sizes (`_profile_track.run_settings`' keys; the defaults otherwise).
        stats: Interval settings (default: 95 %, seed 0, 1000 resamples).
        seed: The trial seed.
    """
    out = measured_profile(
        {"adapter": lambda _trace: adapter}, traces, measures=measures,
        stats=stats or StatsPlan(0.95, 0, 1000), corpus_sha="library (no corpus hash)",
        fit_traces=fit_traces, settings=dict(settings or {}), seed=seed,
    )  # fmt: skip
    return {figure.name: figure for figure in out["figures"]["adapter"]}


def library_trial(
    build: AdapterBuilder,
    trace: Trace,
    measures: list[TrbMeasure],
    fit_traces: Sequence[Trace],
    settings: dict[str, Any],
    seed: int,
    trusted: bool,
    blind_key: str | None,
    skip: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One trial as `run_trial` makes it, without the ledger (`_failed` marks a failure).

    `skip` is `measure_trace`'s: the measures not run for this candidate (a seed replica's).
    """
    try:
        inner = build(trace)
    except NotApplicable as reason:
        return {"_failed": False, "applicable": False, "reason": str(reason)}
    tier = getattr(inner, "tier", None)
    recorder = prepare_adapter(inner, fit_traces=fit_traces, settings=settings, seed=seed,
                               blind_key=blind_key, trusted_native=trusted)  # fmt: skip
    out: dict[str, Any] = {"adapter_tier": str(getattr(tier, "value", tier))}
    try:
        results = measure_trace(measures, recorder, trace, seed, skip)
    except NotApplicable as reason:
        return {**out, "_failed": False, "applicable": False, "reason": str(reason)}
    except Exception:  # the adapter's failure: every measure's worst case, as in the track
        return {**out, "_failed": True}
    return {**out, "_failed": False, "applicable": True, "measures": results,
            "responses": recorder.responses()}  # fmt: skip
