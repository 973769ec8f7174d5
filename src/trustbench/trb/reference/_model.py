"""The reference native model: recurrent encoder -> r-head with explicit slots -> policy.

The policy reads the r vector *and* the hidden state directly (a bypass). Nothing in the
architecture forces action to go through r, so whether r governs action is decided by the
training objective alone, which is what the governance gap measures:

- ablation: L_trace + L_selfrep. r is trained to be accurate, but the policy may read the
  bypass, leaving r an accurate but epiphenomenal narration.
- full: L_trace + L_selfrep + L_gov, where L_gov = KL(Phi(r') || pi(. | h, do(r = r'))) over
  the training counterfactuals: interchange-intervention training (Geiger et al. 2022).
"""

from __future__ import annotations

import torch
from torch import nn

from trustbench.trb.adapter._protocol import (
    ACTIONS,
    DOOR_STATES,
    GOALS,
    GUSTS,
    AdapterTier,
    Observation,
    SelfReport,
    StepContext,
)

# ------------------------------------------------------------------------------------------------
# Tensor encodings of observations and self-reports for the reference native model.

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


class ReferenceNativeModel(nn.Module):
    """GRU encoder, slot head for r_t, and a policy over [r, h].

    Args:
        length: Corridor length the encoder is sized for.
        horizon: Episode horizon the encoder is sized for.
        hidden: Hidden width.
    """

    def __init__(self, length: int, horizon: int, hidden: int) -> None:
        super().__init__()
        self.gru = nn.GRU(obs_dim(length, horizon), hidden, batch_first=True)
        # r logits: goal(2), belief(2), plan(3), confidence(1), caused_by_self(1).
        self.r_head = nn.Linear(hidden, R_DIM)
        self.policy = nn.Sequential(
            nn.Linear(R_DIM + hidden, hidden), nn.Tanh(), nn.Linear(hidden, len(ACTIONS))
        )

    def encode(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Hidden states (B, T, H) and r logits (B, T, R_DIM) for observation sequences."""
        h, _ = self.gru(obs)
        return h, self.r_head(h)

    def policy_logits(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """Action logits given hidden state h and an r vector (own or intervened)."""
        return self.policy(torch.cat([r, h], dim=-1))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Hidden states, r logits and action logits acting on the model's own r."""
        h, r_logits = self.encode(obs)
        return h, r_logits, self.policy_logits(h, soft_report(r_logits))


# ------------------------------------------------------------------------------------------------
# The native adapter around a reference model: emit_r reads the r head, act does do(r).


class NativeModelAdapter:
    """A `native`-tier adapter: r_override replaces the r vector the policy reads.

    Args:
        model: A trained reference model (eval mode).
        name: Name in result rows.
        length: Corridor length the model was trained on.
        horizon: Horizon the model was trained on.
    """

    tier = AdapterTier.NATIVE
    supports_override = True

    def __init__(self, model: ReferenceNativeModel, name: str, length: int, horizon: int) -> None:
        self.model = model
        self.name = name
        self._length, self._horizon = length, horizon
        self._memo: dict[tuple[Observation, ...], tuple[torch.Tensor, torch.Tensor]] = {}

    def seed(self, value: int) -> None:
        """The adapter is deterministic (no sampling); nothing to seed."""

    def _state(self, context: StepContext) -> tuple[torch.Tensor, torch.Tensor]:
        key = context.observations
        if key not in self._memo:
            if len(self._memo) > 50_000:
                self._memo.clear()
            x = torch.tensor([[encode_observation(o, self._length, self._horizon) for o in key]])
            with torch.no_grad():
                h, r_logits = self.model.encode(x)
            self._memo[key] = (h[0, -1], r_logits[0, -1])
        return self._memo[key]

    def emit_r(self, context: StepContext) -> SelfReport:
        """Read the slots off the r head (argmax for categorical slots)."""
        _, logits = self._state(context)
        soft = soft_report(logits)
        return SelfReport(
            goal=GOALS[int(soft[0:2].argmax())],  # type: ignore[arg-type]
            belief=DOOR_STATES[int(soft[2:4].argmax())],  # type: ignore[arg-type]
            planned_next=ACTIONS[int(soft[4:7].argmax())],  # type: ignore[arg-type]
            confidence=float(soft[7]),
            caused_by_self=None if context.t == 0 else float(soft[8]),
        )

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        """Policy distribution; with an override, do(r := r') on the policy's r input."""
        h, logits = self._state(context)
        r = soft_report(logits) if r_override is None else torch.tensor(encode_report(r_override))
        with torch.no_grad():
            p = torch.softmax(self.model.policy_logits(h, r).double(), -1)
        values = [float(v) for v in p]
        total = sum(values)
        return {a: v / total for a, v in zip(ACTIONS, values, strict=True)}
