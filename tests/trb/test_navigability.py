from __future__ import annotations

import numpy as np

from trustbench.trb.adapter._protocol import Observation
from trustbench.trb.corpus import generate_split
from trustbench.trb.instruments import EpiphenomenalOracle, GovernedOracle, SabotagedAblation
from trustbench.trb.measures import Start, exact_reach, sampled_reach
from trustbench.trb.track._measures import StatsPlan
from trustbench.trb.track._profile import split_figures
from trustbench.trb.world import CorridorConfig, CorridorWorld, reference_continuation


def _planner_policy(world: CorridorWorld, goal: str, belief: str):
    def policy(contexts):
        out = []
        for c in contexts:
            obs = c.observations[-1]
            r = world.coherent_report(obs.position, goal, belief, obs.steps_left, None)
            out.append(reference_continuation(r.model_copy(update={"confidence": 1.0})))
        return out

    return lambda _k: policy


def _start(cell: int, steps: int, door: str, target: int) -> Start:
    obs = Observation(position=cell, steps_left=steps, goal_cue="right", door_cue=door)
    return Start("s", (obs,), door, target)


def test_exact_enumeration_equals_the_worlds_dynamic_programme_for_the_planner():
    world = CorridorWorld(CorridorConfig(length=6, horizon=4, start_cells=(2,)))
    for cell in range(6):
        for door in ("open", "closed"):
            policy = _planner_policy(world, "right", door)
            got = exact_reach(world, [_start(cell, 4, door, 5)], policy)
            want = world.reach_probability(cell, "right", door, 4)
            assert abs(got[0] - want) < 1e-12


def test_monte_carlo_agrees_with_enumeration_within_sampling_error():
    world = CorridorWorld(CorridorConfig(length=6, horizon=4, start_cells=(2,)))
    starts = [_start(2, 4, "open", 5), _start(3, 4, "open", 0)]
    policy = _planner_policy(world, "right", "open")
    exact = exact_reach(world, starts, policy)
    mc = sampled_reach(world, starts, policy, n_samples=4000, seed=3)
    assert np.all(np.abs(mc - exact) < 4 * np.sqrt(exact * (1 - exact) / 4000) + 1e-9)


def test_a_failed_candidate_call_never_counts_as_reaching():
    world = CorridorWorld(CorridorConfig(length=6, horizon=3))
    got = exact_reach(world, [_start(3, 3, "open", 5)], lambda _k: lambda cs: [None] * len(cs))
    assert got[0] == 0.0


def _navigability(adapter, *, samples=8, max_nodes=1000):
    """Track 5's figures on 12 eval traces (the `navigability` measure, one trial per trace)."""
    return split_figures(
        adapter, generate_split("eval", 12, seed=5), ["navigability"],
        fit_traces=generate_split("train", 20, seed=6), seed=1,
        settings={"navigation_samples": samples, "max_enumeration_nodes": max_nodes},
        stats=StatsPlan(0.95, 1, 200),
    )  # fmt: skip


def test_governed_oracle_steers_with_positive_lift_and_zero_path_dependence():
    result = _navigability(GovernedOracle())
    assert "seeded Monte Carlo" in result["reach_rate_lift"].description
    assert result["reach_rate_lift"].estimate > 0.1
    # The oracle acts exactly as the reference agent does, so its loop penalty is the
    # reference agent's own on the same draws: the diagnostic is exactly zero.
    assert result["holonomy"].estimate == 0.0


def test_model_that_ignores_r_has_no_lift_over_the_harness_no_r_arm():
    result = _navigability(EpiphenomenalOracle())
    assert result["reach_rate_lift"].estimate == 0.0


def test_a_sabotaged_adapter_ablation_cannot_inflate_the_lift():
    saboteur = SabotagedAblation()
    sabotaged = _navigability(saboteur)["reach_rate_lift"]
    honest = _navigability(GovernedOracle())["reach_rate_lift"]
    assert saboteur.ablation_calls == 0
    assert (sabotaged.estimate, sabotaged.intervals) == (honest.estimate, honest.intervals)
