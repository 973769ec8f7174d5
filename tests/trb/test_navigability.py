from __future__ import annotations

import numpy as np

from trustbench.trb.adapter._schema import Observation
from trustbench.trb.corpus import generate_split
from trustbench.trb.instruments import EpiphenomenalOracle, GovernedOracle, SabotagedAblation
from trustbench.trb.measures import Start, exact_reach, navigability, sampled_reach
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


def test_governed_oracle_steers_with_positive_lift_and_zero_path_dependence():
    traces = generate_split("eval", 12, seed=5)
    result = navigability(GovernedOracle(), traces, n_samples=8, seed=1, resamples=200)
    assert result["method"].startswith("seeded Monte Carlo")
    assert result["lift"]["value"] > 0.1
    # The oracle acts exactly as the reference agent does, so its loop penalty is the
    # reference agent's own on the same draws: the diagnostic is exactly zero.
    assert result["path_dependence"]["difference"]["value"] == 0.0


def test_model_that_ignores_r_has_no_lift_over_the_harness_no_r_arm():
    traces = generate_split("eval", 12, seed=5)
    result = navigability(
        EpiphenomenalOracle(), traces, steps=3, max_nodes=100, seed=1, resamples=200
    )
    assert result["method"] == "exact enumeration"
    assert result["lift"]["value"] == 0.0
    assert not result["lift"]["pass_bar_met"]


def test_a_sabotaged_adapter_ablation_cannot_inflate_the_lift():
    traces = generate_split("eval", 12, seed=5)
    saboteur = SabotagedAblation()
    kw = {"steps": 3, "max_nodes": 100, "seed": 1, "resamples": 200}
    sabotaged = navigability(saboteur, traces, **kw)
    honest = navigability(GovernedOracle(), traces, **kw)
    assert saboteur.ablation_calls == 0
    assert sabotaged["lift"] == honest["lift"]
    assert sabotaged["ablation"].startswith("harness no-r arm")
