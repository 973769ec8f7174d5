from __future__ import annotations

import pytest

from trustbench.trb import GovernedOracle, UniformOracle, generate_split
from trustbench.trb.measures import AblationUnsupported, viability

UNIFORM = {"left": 1 / 3, "stay": 1 / 3, "right": 1 / 3}


class _PlannerWithUniformAblation(GovernedOracle):
    def act_without_r(self, context):
        return UNIFORM


class _UniformWithPlannerAblation(UniformOracle):
    def emit_r(self, context):
        return GovernedOracle().emit_r(context)

    def act_without_r(self, context):
        return GovernedOracle().act(context)


@pytest.fixture(scope="module")
def traces():
    return generate_split("eval", 40, seed=9)


def test_acting_through_a_useful_r_retains_viability_above_one(traces):
    result = viability(_PlannerWithUniformAblation(), traces, rollouts=3, seed=2, resamples=300)
    ratio = result["completion_retention_ratio"]
    assert ratio["value"] > 1 and ratio["low"] > 1
    assert not result["flag_below_one"]
    assert result["completion_r_mediated"]["denominator"] == 120


def test_self_representation_that_degrades_action_is_flagged_below_one(traces):
    result = viability(_UniformWithPlannerAblation(), traces, rollouts=3, seed=2, resamples=300)
    assert result["completion_retention_ratio"]["value"] < 1
    assert result["flag_below_one"] is True
    assert result["completion_retention_ratio"]["interval_below_one"] is True


def test_both_conditions_share_their_random_draws(traces):
    # An adapter whose ablation is its own policy must retain exactly 1 (paired draws).
    class Same(GovernedOracle):
        def act_without_r(self, context):
            return self.act(context)

    result = viability(Same(), traces, rollouts=2, seed=4, resamples=200)
    assert result["completion_retention_ratio"]["value"] == 1.0
    assert result["calibration_retention_ratio"]["value"] == 1.0


def test_adapter_without_an_ablation_is_refused_not_scored(traces):
    with pytest.raises(AblationUnsupported):
        viability(GovernedOracle(), traces)


def test_truthful_confidence_matches_the_exact_reach_probability(traces):
    # The oracle states the world's exact reach probability: zero error against it.
    result = viability(_PlannerWithUniformAblation(), traces, rollouts=1, seed=2, resamples=200)
    assert result["squared_error_vs_exact_r_mediated"]["value"] < 1e-20
    assert result["squared_error_vs_exact_ablation"]["value"] < 1e-20
