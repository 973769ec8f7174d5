"""Tensor encodings of observations and self-reports for the reference native model."""

from __future__ import annotations

import torch

from trustbench.trb.adapter._schema import (
    ACTIONS,
    DOOR_STATES,
    GOALS,
    GUSTS,
    Observation,
    SelfReport,
)

R_DIM = len(GOALS) + len(DOOR_STATES) + len(ACTIONS) + 2
"""goal one-hot, belief one-hot, plan one-hot, confidence, caused_by_self."""


def obs_dim(length: int, horizon: int) -> int:
    """Width of one encoded observation for a world of this size."""
    return length + (horizon + 1) + 3 + 3 + 4 + 4


def encode_observation(obs: Observation, length: int, horizon: int) -> list[float]:
    """One-hot blocks: cell, steps left, goal cue, door sign, last gust, last action.

    Each optional block has a leading "absent" position, so "not shown" is an explicit input
    rather than an all-zero vector.
    """
    v = [0.0] * obs_dim(length, horizon)
    v[min(obs.position, length - 1)] = 1.0
    o = length
    v[o + min(obs.steps_left, horizon)] = 1.0
    o += horizon + 1
    v[o + (0 if obs.goal_cue is None else 1 + GOALS.index(obs.goal_cue))] = 1.0
    o += 3
    v[o + (0 if obs.door_cue is None else 1 + DOOR_STATES.index(obs.door_cue))] = 1.0
    o += 3
    v[o + (0 if obs.last_gust is None else 1 + GUSTS.index(obs.last_gust))] = 1.0
    o += 4
    v[o + (0 if obs.last_action is None else 1 + ACTIONS.index(obs.last_action))] = 1.0
    return v


def encode_report(r: SelfReport) -> list[float]:
    """A self-report as the policy's r input (an absent caused_by_self reads as 0.5)."""
    v = [0.0] * R_DIM
    v[GOALS.index(r.goal)] = 1.0
    v[2 + DOOR_STATES.index(r.belief)] = 1.0
    v[4 + ACTIONS.index(r.planned_next)] = 1.0
    v[7] = r.confidence
    v[8] = 0.5 if r.caused_by_self is None else r.caused_by_self
    return v


def soft_report(r_logits: torch.Tensor) -> torch.Tensor:
    """The model's own r as the policy reads it: probabilities per slot, same layout."""
    return torch.cat(
        [
            torch.softmax(r_logits[..., 0:2], -1),
            torch.softmax(r_logits[..., 2:4], -1),
            torch.softmax(r_logits[..., 4:7], -1),
            torch.sigmoid(r_logits[..., 7:9]),
        ],
        dim=-1,
    )
