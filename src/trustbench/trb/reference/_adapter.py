"""The native adapter around a reference model: emit_r reads the r head, act does do(r)."""

from __future__ import annotations

import torch

from trustbench.trb.adapter._protocol import AdapterTier
from trustbench.trb.adapter._schema import (
    ACTIONS,
    DOOR_STATES,
    GOALS,
    Observation,
    SelfReport,
    StepContext,
)
from trustbench.trb.reference._encoding import encode_observation, encode_report, soft_report
from trustbench.trb.reference._model import ReferenceNativeModel


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
