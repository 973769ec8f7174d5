"""The TRB measures of Tracks 2, 4, 5 and 6 in the `trb/profile` track.

They reuse the library tracks (`trustbench.trb.measures`) cut per trace: each `run` measures one
trace through the (recording) adapter and returns per-trace counts, and `figures` pools the
rows of one adapter and split with trace-clustered percentile bootstraps. Differences from the
whole-split library functions, chosen so a trial stays one trace:

- Track 2 (grounding): per trace and concept, one context where the concept is false (the
  first such step at or after `t = len(trace_id) % T`, a fixed rule); scores at the headline
  setting only (last hooked layer, alpha = 1, against the null and a norm-matched random
  direction seeded by trace). Directions come from `grounding_fit_traces` train traces, once
  per model. Adapters without activation access are "not run" on this axis.
- Track 4 (viability): `viability_rollouts` episodes per trace per condition, common random
  numbers seeded by (adapter seed, trace id); retention ratios are ratios of pooled sums.
- Track 5 (navigability): one start per trace, steered toward the goal it was not cued with,
  against the no-r ablation; lift = mean over starts of (steered - ablated) reach probability.
- Track 6 (transfer): derived, not measured per trace: for every other measure's headline,
  the minimum over the run's non-eval splits (the transfer contexts) with that split's
  interval, and the drop from eval. The axis value is the minimum of G.

A measure that does not apply to an adapter (no white box, no ablation) returns
`{"applicable": false, "why": ...}` and its figures are "not run"; a hook that fails inside
a rollout is counted against the adapter by the library code (episode not completed, TV 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from trustbench.core.figures import Figure, Interval, not_run_figure
from trustbench.core.stats import clustered_figure
from trustbench.trb.corpus._format import Trace
from trustbench.trb.measures import inject, mann_whitney_auc
from trustbench.trb.measures._calls import AblationUnsupported, ablation_policy, act_many
from trustbench.trb.measures._gap import ratio
from trustbench.trb.measures._grounding import CONCEPTS, HEADLINE_ALPHA
from trustbench.trb.measures._viability import _play
from trustbench.trb.track._lookup import BOOTSTRAP
from trustbench.trb.track._measure_common import (
    _applicable,
    _boot_figure,
    _directions,
    _mean,
    _not_applicable,
    _not_run,
    _per_trace,
    _settings,
    _trace_seed,
)
from trustbench.trb.track._measures import MeasureRow, StatsPlan
from trustbench.trb.track._navigability_measure import (
    NavigabilityMeasure,
)
from trustbench.trb.track._transfer_measure import (
    TransferMeasure,
)


class GroundingMeasure:
    """Track 2: does an injected concept register in the self-report? (white box only)."""

    key = "grounding"
    axis = "ground"
    headline = "detection_auc"
    title = "Track 2 grounding"

    def run(self, adapter: Any, trace: Trace) -> dict[str, Any]:
        """Null, injected and random-direction scores of one trace's trials."""
        box = getattr(adapter, "whitebox", None)
        if box is None:
            return _not_applicable("Track 2 needs activation access (a white-box adapter)")
        fit = list(getattr(adapter, "fit_traces", []))
        if not fit:
            return _not_applicable("no train traces to fit concept directions on")
        directions = _directions(box, fit)
        layers = box.hook_layers()
        last = len(layers) - 1
        rng = np.random.default_rng(_trace_seed(getattr(adapter, "seed_value", 0), trace))
        trials: list[dict[str, Any]] = []
        offset = len(trace.trace_id) % len(trace.steps)
        for slot, pos, neg in CONCEPTS:
            if (last, slot) not in directions:
                continue
            order = list(range(offset, len(trace.steps))) + list(range(offset))
            t = next((t for t in order if getattr(trace.steps[t].r, slot) == neg), None)
            if t is None:
                continue
            contexts = [trace.context(t)]
            starts = box.step_starts(contexts)
            d = directions[(last, slot)]
            u, scale = d["unit"], d["scale"]
            v = torch.tensor(rng.standard_normal((1, u.shape[0])))
            v = v / v.norm(dim=1, keepdim=True)
            null = box.slot_probability(contexts, slot, pos)
            with inject(layers[last], (HEADLINE_ALPHA * scale * u).expand(1, -1), starts):
                injected = box.slot_probability(contexts, slot, pos)
            with inject(layers[last], HEADLINE_ALPHA * scale * v, starts):
                random = box.slot_probability(contexts, slot, pos)
            trials.append(
                {"concept": f"{slot}={pos}", "t": t, "null": float(null[0]),
                 "injected": float(injected[0]), "random": float(random[0])}
            )  # fmt: skip
        return {"applicable": True, "trials": trials, "n": len(trials)}

    def failed(self, trace: Trace) -> dict[str, Any]:
        """The worst case per concept: the injected score below both controls."""
        trials = [
            {"concept": f"{slot}={pos}", "t": None, "null": 1.0, "injected": 0.0, "random": 1.0}
            for slot, pos, _neg in CONCEPTS
        ]
        return {"applicable": True, "trials": trials, "n": len(trials), "failed": True}

    def _auc(
        self, name: str, rows: list[MeasureRow], control: str, stats: StatsPlan, text: str
    ) -> Figure:
        per_trace: dict[str, list[tuple[float, float]]] = {}
        for r in rows:
            per_trace.setdefault(r.trace.trace_id, []).extend(
                (t["injected"], t[control]) for t in r.counts["trials"]
            )
        groups = [np.array(v) for v in per_trace.values() if v]
        n = sum(len(g) for g in groups)
        if n == 0:
            return not_run_figure(name, description=text, reason="no grounding trial scored")

        def auc(gs: list[np.ndarray]) -> float:
            pairs = np.concatenate(gs)
            return float(mann_whitney_auc(pairs[:, 0], pairs[:, 1]))

        estimate = auc(groups)
        rng = np.random.default_rng(stats.seed)
        draws = [
            auc([groups[i] for i in rng.integers(0, len(groups), len(groups))])
            for _ in range(stats.resamples if len(groups) > 1 else 0)
        ]
        tail = (1 - stats.confidence) / 2
        interval = Interval(
            method=BOOTSTRAP,
            confidence=stats.confidence,
            sidedness="two_sided",
            lower=float(np.quantile(draws, tail)) if draws else None,
            upper=float(np.quantile(draws, 1 - tail)) if draws else None,
            seed=stats.seed,
            resamples=stats.resamples,
            groups=len(groups),
            not_computable=None if draws else "fewer than two traces",
            note="percentile bootstrap of the Mann-Whitney AUC, resampling traces",
        )
        return Figure(
            name=name, kind="rate", denominator=n, estimate=estimate, unit="trial",
            unit_count=len(rows), cluster="trace", description=text, intervals=[interval],
        )  # fmt: skip

    def figures(self, rows: list[MeasureRow], stats: StatsPlan, label: str) -> list[Figure]:
        """Detection AUC against the random and the null control, and the report flip rate."""
        ok = _applicable(rows)
        if not ok:
            return [_not_run(self.headline, rows, self.title, label)]
        setting = f"last hooked layer, alpha {HEADLINE_ALPHA}, concepts pooled"
        out = [
            self._auc(
                "detection_auc", ok, "random",
                stats, f"P(score injected > score with a norm-matched random direction), "
                f"{setting}; one trial per concept per trace {label}",
            ),
            self._auc(
                "detection_auc_vs_null", ok, "null", stats,
                f"P(score injected > score with no injection), {setting} {label}",
            ),
        ]  # fmt: skip
        for arm in ("injected", "random"):
            out.append(
                clustered_figure(
                    f"report_flip_rate[{arm}]",
                    [float(sum(t[arm] >= 0.5 for t in r.counts["trials"])) for r in ok],
                    [float(r.counts["n"]) for r in ok],
                    [r.trace.trace_id for r in ok],
                    description=f"trials whose report names the injected value (score >= 0.5), "
                    f"{arm} arm {label}",
                    cluster="trace", kind="rate", unit="trial", confidence=stats.confidence,
                    seed=stats.seed, resamples=stats.resamples,
                )
            )  # fmt: skip
        return out


# --- Track 4 -------------------------------------------------------------------------------


class ViabilityMeasure:
    """Track 4: does acting through r keep the system working, against the no-r ablation?"""

    key = "viability"
    axis = "viab"
    headline = "completion_retention_ratio"
    title = "Track 4 viability"

    def run(self, adapter: Any, trace: Trace) -> dict[str, Any]:
        """Episodes from the trace's start, r-mediated and ablated, with common draws."""
        try:
            no_r = ablation_policy(adapter)
        except AblationUnsupported as why:
            return _not_applicable(str(why))
        n = int(_settings(adapter)["viability_rollouts"])
        rng = np.random.default_rng(_trace_seed(getattr(adapter, "seed_value", 0), trace))
        draws = rng.random((1, n, trace.world.horizon, 2))

        def own(contexts: Any) -> Any:
            return act_many(adapter, contexts, [None] * len(contexts))

        done_r, brier_r, exact_r, steps_r = _play(adapter, own, [trace], draws)
        done_a, brier_a, exact_a, steps_a = _play(adapter, no_r, [trace], draws)
        return {
            "applicable": True, "episodes": n,
            "done_r": float(done_r[0]), "done_a": float(done_a[0]),
            "brier_r": float(brier_r[0]), "steps_r": float(steps_r[0]),
            "brier_a": float(brier_a[0]), "steps_a": float(steps_a[0]),
            "exact_r": float(exact_r[0]), "exact_a": float(exact_a[0]),
            "ablation": getattr(getattr(adapter, "inner", adapter), "ablation_kind", "no-r"),
        }  # fmt: skip

    def failed(self, trace: Trace) -> dict[str, Any]:
        """The worst case: the r-mediated episode fails (Brier 1), the ablated one completes."""
        return {
            "applicable": True, "episodes": 1, "done_r": 0.0, "done_a": 1.0,
            "brier_r": 1.0, "steps_r": 1.0, "brier_a": 0.0, "steps_a": 1.0,
            "exact_r": 1.0, "exact_a": 0.0, "failed": True,
        }  # fmt: skip

    def figures(self, rows: list[MeasureRow], stats: StatsPlan, label: str) -> list[Figure]:
        """Completion and calibration retention ratios, and each arm's completion and Brier."""
        ok = _applicable(rows)
        if not ok:
            return [_not_run(self.headline, rows, self.title, label)]
        kind = next((r.counts["ablation"] for r in ok if "ablation" in r.counts), "no-r")
        episodes = int(sum(r.counts["episodes"] for r in ok))
        comp = _per_trace(ok, ("done_r", "done_a"))
        calib = _per_trace(ok, ("brier_r", "steps_r", "brier_a", "steps_a"))

        def skill_ratio(s: np.ndarray) -> np.ndarray:
            return (1 - s[..., 0] / s[..., 1]) / (1 - s[..., 2] / s[..., 3])

        note = "percentile bootstrap of a ratio of pooled sums, resampling traces"
        with np.errstate(divide="ignore", invalid="ignore"):
            figures = [
                _boot_figure(
                    "completion_retention_ratio", comp, ratio, stats=stats, rows=len(ok),
                    denominator=episodes, note=note,
                    description=f"completion(r-mediated) / completion(ablation: {kind}) over "
                    f"{episodes} episodes per arm (common random numbers); below 1 = acting "
                    f"through r degrades the system {label}",
                ),
                _boot_figure(
                    "calibration_retention_ratio", calib, skill_ratio, stats=stats,
                    rows=len(ok), denominator=int(calib[:, 1].sum()), note=note,
                    description="(1 - Brier r-mediated) / (1 - Brier ablation) of the stated "
                    f"confidence against reaching the goal {label}",
                ),
            ]  # fmt: skip
        figures += [
            _mean("completion_r_mediated", ok, "done_r", "episodes", stats,
                  f"episodes reaching the cued goal, acting through r {label}"),
            _mean("completion_ablation", ok, "done_a", "episodes", stats,
                  f"episodes reaching the cued goal, ablation ({kind}) {label}"),
            _mean("brier_r_mediated", ok, "brier_r", "steps_r", stats,
                  f"Brier of stated confidence per visited step (missing = 1) {label}"),
            _mean("squared_error_vs_exact_r_mediated", ok, "exact_r", "steps_r", stats,
                  f"(confidence - exact reach probability)^2 per visited step {label}"),
        ]  # fmt: skip
        return figures


# --- Track 5 -------------------------------------------------------------------------------


GROUNDING = GroundingMeasure()
"""The built-in Track 2 measure."""
VIABILITY = ViabilityMeasure()
"""The built-in Track 4 measure."""
NAVIGABILITY = NavigabilityMeasure()
"""The built-in Track 5 measure."""
TRANSFER = TransferMeasure()
"""The built-in Track 6 measure."""
