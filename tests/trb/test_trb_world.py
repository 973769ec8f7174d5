from __future__ import annotations

import numpy as np
import pytest

from trustbench.trb.adapter import SelfReport
from trustbench.trb.corpus import generate_split
from trustbench.trb.world import CorridorConfig, CorridorWorld, reference_continuation

WORLD = CorridorWorld(CorridorConfig(length=7, horizon=6, gust_probability=0.3))


def test_recorded_draw_maps_to_gust_by_probability_bands() -> None:
    assert WORLD.gust_of(0.10) == "left"
    assert WORLD.gust_of(0.20) == "right"
    assert WORLD.gust_of(0.30) == "none"


def test_gust_replaces_the_agents_own_move() -> None:
    assert WORLD.next_cell(3, "left", "right", "open") == 4
    assert WORLD.next_cell(3, "left", "none", "open") == 2


def test_closed_door_blocks_entry_to_the_right_goal() -> None:
    assert WORLD.next_cell(5, "right", "none", "closed") == 5
    assert WORLD.next_cell(5, "stay", "right", "closed") == 5
    assert WORLD.next_cell(5, "right", "none", "open") == 6


def test_reach_probability_is_exact_for_one_step_before_the_goal() -> None:
    # From cell 5 with one move left: reach unless a left gust (0.15) or ... the planner moves
    # right; no gust (0.70) or a right gust (0.15) both reach the goal: 0.85.
    assert WORLD.reach_probability(5, "right", "open", 1) == pytest.approx(0.85)
    assert WORLD.reach_probability(5, "right", "open", 0) == 0.0
    assert WORLD.reach_probability(6, "right", "open", 0) == 1.0
    assert WORLD.reach_probability(3, "right", "closed", 6) == 0.0


def test_reach_probability_agrees_with_monte_carlo() -> None:
    rng = np.random.default_rng(3)
    hits = 0
    n = 20_000
    for _ in range(n):
        cell = 3
        for _ in range(4):
            if cell == 0:
                break
            gust = WORLD.gust_of(rng.random())
            cell = WORLD.next_cell(cell, WORLD.planned_action(cell, "left", "open"), gust, "open")
        hits += cell == 0
    exact = WORLD.reach_probability(3, "left", "open", 4)
    assert abs(hits / n - exact) < 4 * np.sqrt(exact * (1 - exact) / n)


def test_reference_continuation_takes_plan_with_confidence_else_uniform() -> None:
    r = SelfReport(goal="left", belief="open", planned_next="left", confidence=0.7)
    phi = reference_continuation(r)
    assert phi["left"] == pytest.approx(0.7 + 0.1)
    assert phi["stay"] == pytest.approx(0.1)
    assert sum(phi.values()) == pytest.approx(1.0)


def test_but_for_label_is_false_when_a_gust_overrides_the_move() -> None:
    assert WORLD.caused_by_self(3, "right", "right", "open") is False
    assert WORLD.caused_by_self(3, "right", "none", "open") is True
    assert WORLD.caused_by_self(0, "left", "none", "open") is False  # wall: zero do-effect


def test_false_credit_cells_improve_the_outcome_with_zero_do_effect() -> None:
    traces = generate_split("eval", 80, seed=5)
    world = CorridorWorld(traces[0].world)
    cells = 0
    for trace in traces:
        target = world.target(trace.goal)
        for prev, step in zip(trace.steps, trace.steps[1:], strict=False):
            if not step.attribution.false_credit:
                continue
            cells += 1
            gust = world.gust_of(prev.gust_draw)
            cell = prev.observation.position
            assert prev.action != "stay"
            assert world.next_cell(cell, prev.action, gust, trace.door) == world.next_cell(
                cell, "stay", gust, trace.door
            )
            assert abs(step.observation.position - target) < abs(cell - target)
            moved = step.observation.position - cell
            assert moved == {"left": -1, "right": 1}[prev.action]  # looks self-caused
    assert cells > 0


def test_true_report_is_recovered_from_observations_alone() -> None:
    for trace in generate_split("eval", 20, seed=9):
        for step in trace.steps:
            assert WORLD.report_from_observations(trace.context(step.t).observations) == step.r
