"""Helpers shared by the `trb/profile` measures: adapter settings, per-trace rows, bootstraps."""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from trustbench.core.figures import Figure, FigureKind, Interval, not_run_figure
from trustbench.core.stats import clustered_figure
from trustbench.trb.corpus._format import Trace
from trustbench.trb.measures import concept_directions
from trustbench.trb.measures._calls import AblationUnsupported, act_many, require_override
from trustbench.trb.measures._gap import cluster_bootstrap
from trustbench.trb.measures._numeric import total_variation
from trustbench.trb.track._lookup import BOOTSTRAP
from trustbench.trb.track._measures import MeasureRow, StatsPlan
from trustbench.trb.world import reference_continuation

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


ZERO_R = "native: r routed to zero at act (the reference model's r input set to 0)"
"""The no-r arm of a built-in native model (spec Track 4: "route r_t to zero at act")."""
MARGINAL_R = (
    "black box: act(c, r_override = r drawn per context from the train split's r marginal, "
    "seeded by context; the draws are recorded)"
)
"""The no-r arm of every other adapter: an r it cannot tell from a real one, per context."""


class NoRArm:
    """The harness-built no-r arm of Tracks 4/5, and the record of what it drew.

    A built-in native model (harness code, exposing `act_zero_r_many` through the recorder)
    has r routed to zero at act. Any other adapter gets, per context, an r drawn from the r
    marginal of the train traces (other contexts; never the scored trace's), by a hash of
    (trial seed, trace, step; `_draw`): a fixed arm (one mean r everywhere) is easy to
    recognise and sabotage, a draw from the marginal looks like any real r, and the arm's
    answers are scored against Phi(drawn r) so treating it apart shows.
    The adapter's own `act_without_r` is never used.

    Raises:
        AblationUnsupported: no train traces, or the adapter takes no r_override.
    """

    def __init__(self, adapter: Any, trace: Trace) -> None:
        self.draws: list[int] = []
        self.tv_sum = 0.0
        """Sum of TV(answer, Phi(drawn r)) over the arm's calls: the arm is a blinded set of
        overrides, so a governed adapter follows them as it follows Track 1's edits."""
        zero = getattr(adapter, "act_zero_r_many", None)
        if callable(zero):
            self.kind, self._policy = ZERO_R, zero
            return
        fit = list(getattr(adapter, "fit_traces", []))
        pool = [step.r for t in fit for step in t.steps]
        if not pool:
            raise AblationUnsupported("no train traces to draw r from for the no-r arm")
        require_override(adapter)
        self.kind = MARGINAL_R
        salt = f"{getattr(adapter, 'seed_value', 0)}|{trace.trace_id}|"

        def policy(contexts: Any) -> Any:
            picks = [_draw(salt, c, len(pool)) for c in contexts]
            self.draws += picks
            answers = act_many(adapter, contexts, [pool[i].model_copy() for i in picks])
            for i, answer in zip(picks, answers, strict=True):
                phi = reference_continuation(pool[i])
                self.tv_sum += 1.0 if answer is None else total_variation(answer, phi)
            return answers

        self._policy = policy

    def __call__(self, contexts: Any) -> Any:
        """Answer the contexts under the arm."""
        return self._policy(contexts)

    def record(self) -> dict[str, Any]:
        """What the arm was, and its draws (indices into the train r pool, in call order)."""
        digest = hashlib.sha256(json.dumps(self.draws).encode()).hexdigest()
        out: dict[str, Any] = {
            "ablation": self.kind, "arm_draws": len(self.draws), "arm_draws_sha256": digest,
        }  # fmt: skip
        if self.kind == MARGINAL_R:
            out["arm_tv_sum"] = self.tv_sum
        return out


def _draw(salt: str, context: Any, n: int) -> int:
    """One draw per (trial seed, trace, step): every rollout at step t acts on the same r.

    Common random numbers across rollouts (less variance between arms), and it makes repeated
    overrides a normal part of the arm, so an adapter that stalls on a repeated override (as a
    fixed-arm detector does) shows it in `no_r_arm_agreement` instead of gaining.
    """
    key = f"{salt}{context.t}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") % n


def _harness_no_r(adapter: Any, trace: Trace) -> NoRArm:
    """The no-r arm for one trace (`NoRArm`)."""
    return NoRArm(adapter, trace)


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
    boot = cluster_bootstrap(per_trace, statistic, **stats.bootstrap())
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


def trace_figure(
    name: str,
    rows: list[MeasureRow],
    numerators: list[float],
    denominators: list[float],
    stats: StatsPlan,
    description: str,
    kind: FigureKind = "rate",
) -> Figure:
    """A per-trial rate or mean over `rows`, its interval clustered by trace (the stats plan's)."""
    return clustered_figure(
        name,
        numerators,
        denominators,
        [r.trace.trace_id for r in rows],
        description=description,
        cluster="trace",
        kind=kind,
        unit="trial",
        confidence=stats.confidence,
        seed=stats.seed,
        resamples=stats.resamples,
    )


def _mean(
    name: str, rows: list[MeasureRow], key: str, den: str, stats: StatsPlan, text: str
) -> Figure:
    numerators = [float(r.counts[key]) for r in rows]
    return trace_figure(
        name, rows, numerators, [float(r.counts[den]) for r in rows], stats, text, kind="mean"
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
