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

from trustbench.trb.adapter._schema import ACTIONS
from trustbench.trb.reference._encoding import R_DIM, obs_dim, soft_report


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
