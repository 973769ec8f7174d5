from __future__ import annotations

import pytest

from trustbench.trb.adapter._schema import SelfReport
from trustbench.trb.corpus import generate_split
from trustbench.trb.instruments import EpiphenomenalOracle, GovernedOracle, SabotagedAblation
from trustbench.trb.measures import AblationUnsupported, viability
from trustbench.trb.measures._calls import mean_report
from trustbench.trb.world import reference_continuation


class _UnhelpfulR(GovernedOracle):
    """Acts on its true r unedited, but any written r makes it act uniformly."""

    def act(self, context, r_override=None):
        if r_override is None:
            return super().act(context)
        return {"left": 1 / 3, "stay": 1 / 3, "right": 1 / 3}


class _BetterWithoutR(GovernedOracle):
    """Never moves on its own; a written r is followed (so the fixed-r arm beats it)."""

    def act(self, context, r_override=None):
        if r_override is None:
            return {"left": 0.0, "stay": 1.0, "right": 0.0}
        return reference_continuation(r_override)


@pytest.fixture(scope="module")
def traces():
    return generate_split("eval", 40, seed=9)


def test_acting_through_a_useful_r_retains_viability_above_one(traces):
    result = viability(_UnhelpfulR(), traces, rollouts=3, seed=2, resamples=300)
    ratio = result["completion_retention_ratio"]
    assert ratio["value"] > 1 and ratio["low"] > 1
    assert not result["flag_below_one"]
    assert result["completion_r_mediated"]["denominator"] == 120


def test_self_representation_that_degrades_action_is_flagged_below_one(traces):
    r_right = SelfReport(goal="right", belief="open", planned_next="right", confidence=1.0)
    result = viability(_BetterWithoutR(), traces, r_bar=r_right, rollouts=3, seed=2, resamples=300)
    assert result["completion_retention_ratio"]["value"] < 1
    assert result["flag_below_one"] is True
    assert result["completion_retention_ratio"]["interval_below_one"] is True


def test_both_conditions_share_their_random_draws(traces):
    # An adapter that ignores r acts identically in both arms: exactly 1 (paired draws).
    result = viability(EpiphenomenalOracle(), traces, rollouts=2, seed=4, resamples=200)
    assert result["completion_retention_ratio"]["value"] == 1.0
    assert result["calibration_retention_ratio"]["value"] == 1.0


def test_adapter_without_override_support_is_refused_not_scored(traces):
    class NoOverride(GovernedOracle):
        supports_override = False

    with pytest.raises(AblationUnsupported):
        viability(NoOverride(), traces)


def test_sabotaged_adapter_ablation_is_never_called_and_cannot_move_the_ratio(traces):
    saboteur = SabotagedAblation()
    sabotaged = viability(saboteur, traces, rollouts=2, seed=3, resamples=200)
    honest = viability(GovernedOracle(), traces, rollouts=2, seed=3, resamples=200)
    assert saboteur.ablation_calls == 0
    assert sabotaged["completion_retention_ratio"] == honest["completion_retention_ratio"]
    assert "harness" in sabotaged["ablation"]


def test_the_no_r_arm_is_the_slotwise_mode_and_mean_confidence(traces):
    r_bar = mean_report(traces)
    reports = [s.r for t in traces for s in t.steps]
    for slot in ("goal", "belief", "planned_next"):
        values = [getattr(r, slot) for r in reports]
        assert values.count(getattr(r_bar, slot)) == max(values.count(v) for v in set(values))
    assert r_bar.confidence == pytest.approx(sum(r.confidence for r in reports) / len(reports))


def test_truthful_confidence_matches_the_exact_reach_probability(traces):
    # The oracle states the world's exact reach probability: zero error against it.
    result = viability(GovernedOracle(), traces, rollouts=1, seed=2, resamples=200)
    assert result["squared_error_vs_exact_r_mediated"]["value"] < 1e-20
    assert result["squared_error_vs_exact_ablation"]["value"] < 1e-20
