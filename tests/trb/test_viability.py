from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from trustbench.core.figures import Figure
from trustbench.trb.corpus import generate_split
from trustbench.trb.instruments import EpiphenomenalOracle, GovernedOracle, SabotagedAblation
from trustbench.trb.track._measures import MeasureRow, StatsPlan
from trustbench.trb.track._profile import split_figures
from trustbench.trb.track._trace_measures import NavigabilityMeasure, ViabilityMeasure
from trustbench.trb.world import reference_continuation


class _UnhelpfulR(GovernedOracle):
    """Acts on its true r unedited, but any written r makes it act uniformly."""

    def act(self, context, r_override=None):
        if r_override is None:
            return super().act(context)
        return {"left": 1 / 3, "stay": 1 / 3, "right": 1 / 3}


class _BetterWithoutR(GovernedOracle):
    """Never moves on its own; a written r is followed (so the no-r arm beats it)."""

    def act(self, context, r_override=None):
        if r_override is None:
            return {"left": 0.0, "stay": 1.0, "right": 0.0}
        return reference_continuation(r_override)


@pytest.fixture(scope="module")
def traces():
    return generate_split("eval", 40, seed=9)


@pytest.fixture(scope="module")
def train():
    return generate_split("train", 40, seed=10)


def _viability(adapter, traces, train, *, rollouts, seed, resamples=300):
    """Track 4's figures for one adapter (the `viability` measure, one trial per trace)."""
    return split_figures(
        adapter, traces, ["viability"], fit_traces=train, seed=seed,
        settings={"viability_rollouts": rollouts}, stats=StatsPlan(0.95, seed, resamples),
    )  # fmt: skip


def test_acting_through_a_useful_r_retains_viability_above_one(traces, train):
    result = _viability(_UnhelpfulR(), traces, train, rollouts=3, seed=2)
    ratio = result["completion_retention_ratio"]
    assert ratio.estimate > 1 and ratio.intervals[0].lower > 1
    assert result["completion_r_mediated"].denominator == 120


def test_self_representation_that_degrades_action_shows_a_ratio_below_one(traces, train):
    result = _viability(_BetterWithoutR(), traces, train, rollouts=3, seed=2)
    ratio = result["completion_retention_ratio"]
    assert ratio.estimate < 1 and ratio.intervals[0].upper < 1


def test_both_conditions_share_their_random_draws(traces, train):
    # An adapter that ignores r acts identically in both arms: exactly 1 (paired draws).
    result = _viability(EpiphenomenalOracle(), traces, train, rollouts=2, seed=4, resamples=200)
    assert result["completion_retention_ratio"].estimate == 1.0
    assert result["calibration_retention_ratio"].estimate == 1.0


def test_adapter_without_override_support_is_not_run_with_the_reason(traces, train):
    class NoOverride(GovernedOracle):
        supports_override = False

    ratio = _viability(NoOverride(), traces, train, rollouts=1, seed=0)[
        "completion_retention_ratio"
    ]
    assert ratio.status != "measured" and "r_override" in (ratio.reason or "")


def test_sabotaged_adapter_ablation_is_never_called_and_cannot_move_the_ratio(traces, train):
    saboteur = SabotagedAblation()
    sabotaged = _viability(saboteur, traces, train, rollouts=2, seed=3, resamples=200)
    honest = _viability(GovernedOracle(), traces, train, rollouts=2, seed=3, resamples=200)
    assert saboteur.ablation_calls == 0
    got, want = sabotaged["completion_retention_ratio"], honest["completion_retention_ratio"]
    assert (got.estimate, got.intervals) == (want.estimate, want.intervals)
    assert "r_override" in got.description  # the harness's arm, asked through overrides


def test_truthful_confidence_matches_the_exact_reach_probability(traces, train):
    # The oracle states the world's exact reach probability: zero error against it.
    result = _viability(GovernedOracle(), traces, train, rollouts=1, seed=2, resamples=200)
    assert result["squared_error_vs_exact_r_mediated"].estimate < 1e-20


# --- intervals on proportions (issue 53): inside [0, 1]; differences left as they are --------


def _rows(counts: list[dict[str, Any]]) -> list[MeasureRow]:
    """One trial per trace; figures read only the trace id of a row's trace."""
    return [
        MeasureRow(cast(Any, SimpleNamespace(trace_id=f"t{i}")), 0, c, False)
        for i, c in enumerate(counts)
    ]


def _robust(figure: Figure) -> tuple[float, float, str | None]:
    interval = figure.interval("cluster_robust_t", 0.95)
    assert interval is not None and interval.lower is not None and interval.upper is not None
    return interval.lower, interval.upper, interval.note


def test_track_4_completion_intervals_stay_inside_0_1_near_a_rare_completion() -> None:
    # 1 of 12 ablated episodes completes: the symmetric t interval would reach below 0.
    counts = [
        {"episodes": 1, "done_r": 1.0, "done_a": float(i == 0), "brier_r": 0.1, "steps_r": 1.0,
         "brier_a": 0.2, "steps_a": 1.0, "exact_r": 0.0, "exact_a": 0.0}
        for i in range(12)
    ]  # fmt: skip
    figures = {
        f.name: f for f in ViabilityMeasure().figures(_rows(counts), StatsPlan(0.95, 1, 200), "")
    }
    lower, upper, note = _robust(figures["completion_ablation"])
    assert (lower, note) == (0.0, "clipped to the estimand's range [0.0, 1.0]")
    assert upper < 1.0
    for interval in figures["completion_r_mediated"].intervals:
        assert interval.not_computable or 0.0 <= interval.lower <= interval.upper <= 1.0  # type: ignore[operator]


def test_track_5_reach_probabilities_are_bounded_but_the_lift_is_not_clipped() -> None:
    counts = [
        {"starts": 1, "steered": float(i != 0), "ablated": float(i == 0), "ceiling": 1.0,
         "lift": float(i != 0) - float(i == 0)}
        for i in range(12)
    ]  # fmt: skip
    figures = {
        f.name: f for f in NavigabilityMeasure().figures(_rows(counts), StatsPlan(0.95, 1, 200), "")
    }
    lower, _, note = _robust(figures["ablation_reach"])
    assert lower == 0.0 and note is not None and "clipped" in note
    _, upper, _ = _robust(figures["steered_reach"])
    assert upper == 1.0
    _, lift_upper, lift_note = _robust(figures["reach_rate_lift"])  # a difference: never clipped
    assert lift_note is None and lift_upper > 1.0
