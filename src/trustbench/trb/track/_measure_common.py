"""Helpers shared by the `trb/profile` measures: adapter settings, per-trace rows, bootstraps."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from trustbench.core.figures import Figure, Interval, not_run_figure
from trustbench.core.stats import clustered_figure
from trustbench.trb.corpus._format import Trace
from trustbench.trb.measures import concept_directions
from trustbench.trb.measures._calls import AblationUnsupported, ablation_policy, mean_report
from trustbench.trb.measures._gap import cluster_bootstrap
from trustbench.trb.track._lookup import BOOTSTRAP
from trustbench.trb.track._measures import MeasureRow, StatsPlan

_SETTINGS: dict[str, Any] = {
    "viability_rollouts": 4,
    "navigation_samples": 16,
    "max_enumeration_nodes": 1000,
    "grounding_fit_traces": 200,
}
"""Track sizes used when the adapter does not carry the run's options (library use)."""


def _trace_seed(seed: int, trace: Trace) -> int:
    """A per-(seed, trace) seed, stable across processes (crc32, not Python's hash)."""
    return (seed * 1_000_003 + zlib.crc32(trace.trace_id.encode())) % (2**32)


def _settings(adapter: Any) -> dict[str, Any]:
    return {**_SETTINGS, **getattr(adapter, "settings", {})}


def _harness_no_r(adapter: Any) -> Any:
    """The harness-built no-r arm of Tracks 4/5: act(c, r_override = mean r of the train split).

    The mean is over the train traces the track hands every trial (never the scored trace,
    whose own r would leak into the arm); the adapter's `act_without_r` is never used.

    Raises:
        AblationUnsupported: no train traces, or the adapter takes no r_override.
    """
    fit = list(getattr(adapter, "fit_traces", []))
    if not fit:
        raise AblationUnsupported("no train traces to average r over for the no-r arm")
    return ablation_policy(adapter, mean_report(fit))


def _not_applicable(why: str) -> dict[str, Any]:
    return {"applicable": False, "why": why}


def _applicable(rows: list[MeasureRow]) -> list[MeasureRow]:
    return [r for r in rows if r.counts.get("applicable", True)]


def _not_run(name: str, rows: list[MeasureRow], title: str, label: str) -> Figure:
    why = next((r.counts.get("why") for r in rows if r.counts.get("why")), "no applicable trial")
    return not_run_figure(name, description=f"{title} {label}", reason=str(why))


def _per_trace(rows: list[MeasureRow], keys: tuple[str, ...]) -> np.ndarray:
    """Counts summed per trace (the cluster), one row per trace."""
    traces: dict[str, np.ndarray] = {}
    for row in rows:
        c = np.array([float(row.counts[k]) for k in keys])
        traces[row.trace.trace_id] = traces.get(row.trace.trace_id, 0) + c
    return np.array(list(traces.values()))


def bootstrap_interval(
    boot: dict[str, Any], stats: StatsPlan, *, groups: int, note: str
) -> Interval:
    """The two-sided percentile interval of a trace bootstrap (`cluster_bootstrap`'s result)."""
    return Interval(
        method=BOOTSTRAP,
        confidence=stats.confidence,
        sidedness="two_sided",
        lower=boot["low"],
        upper=boot["high"],
        seed=stats.seed,
        resamples=stats.resamples,
        groups=groups,
        not_computable=None if boot["low"] is not None else "fewer than two traces",
        note=note,
    )


def _boot_figure(
    name: str,
    per_trace: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    stats: StatsPlan,
    rows: int,
    denominator: int,
    description: str,
    kind: str = "mean",
    note: str,
) -> Figure:
    """A figure whose statistic is a function of summed per-trace counts (trace bootstrap)."""
    boot = cluster_bootstrap(
        per_trace, statistic, seed=stats.seed, resamples=stats.resamples, level=stats.confidence
    )
    if boot["estimate"] is None or not np.isfinite(boot["estimate"]):
        return Figure(
            name=name, status="not_applicable", denominator=denominator, unit="trial",
            unit_count=rows, cluster="trace", description=description,
            reason="the statistic is undefined on these counts (a zero denominator)",
        )  # fmt: skip
    interval = bootstrap_interval(boot, stats, groups=len(per_trace), note=note)
    return Figure(
        name=name, kind=kind, denominator=denominator, estimate=float(boot["estimate"]),  # type: ignore[arg-type]
        unit="trial", unit_count=rows, cluster="trace", description=description,
        intervals=[interval],
    )  # fmt: skip


def _mean(
    name: str, rows: list[MeasureRow], key: str, den: str, stats: StatsPlan, text: str
) -> Figure:
    return clustered_figure(
        name,
        [float(r.counts[key]) for r in rows],
        [float(r.counts[den]) for r in rows],
        [r.trace.trace_id for r in rows],
        description=text,
        cluster="trace",
        kind="mean",
        unit="trial",
        confidence=stats.confidence,
        seed=stats.seed,
        resamples=stats.resamples,
    )


# --- Track 2 -------------------------------------------------------------------------------

_DIRECTIONS: dict[tuple[Any, ...], tuple[Any, dict[Any, Any]]] = {}
"""Concept directions per model and fit set (the model is kept alive beside them)."""


def _directions(box: Any, fit: list[Trace]) -> dict[Any, Any]:
    model = getattr(box, "model", box)
    key = (id(model), type(box).__name__, len(fit), fit[0].trace_id if fit else None)
    if key not in _DIRECTIONS:
        _DIRECTIONS[key] = (model, concept_directions(box, fit, fit_limit=len(fit)))
    return _DIRECTIONS[key][1]
