"""Goal-reach probabilities of a policy in the exact world: enumeration, else seeded Monte Carlo.

A rollout starts from a candidate-visible context (observations up to step t), the hidden
door state and a target cell, and lets a batch policy act for the remaining steps. The
world's transition model is exact, so the reach probability of a policy is

    P(reach) = sum over action/gust paths of prod pi(a_k | c_k) * P(g_k) * 1[target visited]

Enumeration visits 1 + 9 + ... + 9^(k-1) decision contexts for k remaining steps (three
actions times three gust outcomes per step); it is exact and used while that count is at most
`max_nodes`. Beyond it, `n_samples` seeded rollouts per start estimate the probability; the
uniform draws for actions and gusts are indexed by (start, sample, step), so two policies
run with the same seed share every draw (common random numbers: paired comparisons).

A failed candidate call (None) ends that branch as a non-reach: a failure is never success.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from trustbench.trb.adapter._schema import ACTIONS, Observation, StepContext
from trustbench.trb.measures._calls import BatchPolicy
from trustbench.trb.world import CorridorWorld, sample_action

GUSTS_ORDER = ("left", "right", "none")


@dataclass(frozen=True)
class Start:
    """Where a rollout begins."""

    trace_id: str
    """Trace the start was cut from."""
    observations: tuple[Observation, ...]
    """Candidate-visible history up to and including the current step."""
    door: str
    """Hidden true door state (the world's, not the agent's belief)."""
    target: int
    """Target cell whose visit counts as reaching."""


PolicyAt = Callable[[int], BatchPolicy]
"""Gives the batch policy to use at rollout depth k (a steering schedule may change it)."""


def nodes_needed(steps_left: int) -> int:
    """Decision contexts an exact enumeration visits: sum_{d<k} 9^d."""
    return sum(9**d for d in range(steps_left))


def _child(world: CorridorWorld, obs: Observation, cell: int, action: str, gust: str, door: str):
    new = world.next_cell(cell, action, gust, door)
    return new, Observation(
        position=new,
        steps_left=max(obs.steps_left - 1, 0),
        last_gust=gust,  # type: ignore[arg-type]
        last_action=action,  # type: ignore[arg-type]
    )


def _context(trace_id: str, history: tuple[Observation, ...]) -> StepContext:
    return StepContext(trace_id=trace_id, t=len(history) - 1, observations=history)


def exact_reach(world: CorridorWorld, starts: Sequence[Start], policy_at: PolicyAt) -> np.ndarray:
    """Exact reach probability per start by enumeration (batched by depth across starts)."""
    gusts = [(g, p) for g, p in zip(GUSTS_ORDER, _gust_probs(world), strict=True) if p > 0]
    reach = np.zeros(len(starts))
    # frontier entries: (start index, probability, history, cell)
    frontier = []
    for i, s in enumerate(starts):
        cell = s.observations[-1].position
        if cell == s.target:
            reach[i] = 1.0
        else:
            frontier.append((i, 1.0, s.observations, cell))
    depth = 0
    while frontier:
        alive = [f for f in frontier if f[2][-1].steps_left > 0]
        if not alive:
            break
        dists = policy_at(depth)([_context(starts[i].trace_id, h) for i, _, h, _ in alive])
        nxt = []
        for (i, prob, history, cell), dist in zip(alive, dists, strict=True):
            if dist is None:
                continue  # failed call: this branch's mass never reaches
            for a in ACTIONS:
                if dist[a] <= 0:
                    continue
                for g, pg in gusts:
                    new, obs = _child(world, history[-1], cell, a, g, starts[i].door)
                    p = prob * dist[a] * pg
                    if new == starts[i].target:
                        reach[i] += p
                    else:
                        nxt.append((i, p, (*history, obs), new))
        frontier = nxt
        depth += 1
    return reach


def _gust_probs(world: CorridorWorld) -> tuple[float, float, float]:
    p = world.config.gust_probability
    return (p / 2, p / 2, 1.0 - p)


def sampled_reach(
    world: CorridorWorld,
    starts: Sequence[Start],
    policy_at: PolicyAt,
    *,
    n_samples: int,
    seed: int,
) -> np.ndarray:
    """Monte Carlo reach frequency per start (common random numbers across policies)."""
    horizon = max(s.observations[-1].steps_left for s in starts)
    rng = np.random.default_rng(seed)
    draws = rng.random((len(starts), n_samples, max(horizon, 1), 2))
    hits = np.zeros(len(starts))
    # state per (start, sample): history, cell, done
    runs = [
        [i, j, s.observations, s.observations[-1].position]
        for i, s in enumerate(starts)
        for j in range(n_samples)
    ]
    for run in runs:
        if run[3] == starts[run[0]].target:
            hits[run[0]] += 1
    live = [r for r in runs if r[3] != starts[r[0]].target]
    depth = 0
    while live:
        live = [r for r in live if r[2][-1].steps_left > 0]
        if not live:
            break
        dists = policy_at(depth)([_context(starts[r[0]].trace_id, r[2]) for r in live])
        nxt = []
        for run, dist in zip(live, dists, strict=True):
            i, j, history, cell = run
            if dist is None:
                continue
            u_act, u_gust = draws[i, j, depth]
            action = sample_action(dist, float(u_act))
            gust = world.gust_of(float(u_gust))
            new, obs = _child(world, history[-1], cell, action, gust, starts[i].door)
            if new == starts[i].target:
                hits[i] += 1
            else:
                nxt.append([i, j, (*history, obs), new])
        live = nxt
        depth += 1
    return hits / n_samples


def reach(
    world: CorridorWorld,
    starts: Sequence[Start],
    policy_at: PolicyAt,
    *,
    max_nodes: int,
    n_samples: int,
    seed: int,
) -> tuple[np.ndarray, str]:
    """Exact reach probabilities when the horizon allows, else Monte Carlo; and the method."""
    k = max((s.observations[-1].steps_left for s in starts), default=0)
    if nodes_needed(k) <= max_nodes:
        return exact_reach(world, starts, policy_at), "exact enumeration"
    est = sampled_reach(world, starts, policy_at, n_samples=n_samples, seed=seed)
    return est, f"seeded Monte Carlo ({n_samples} rollouts per start, seed {seed})"
