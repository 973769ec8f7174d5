"""Track 2's building blocks: concept directions, and the detection AUC (white-box only).

Concept injection (Lindsey 2025) for a concept "slot = value" (goal = right, belief = closed):
the direction is fitted on train contexts here; the trials, their controls and figures are the
`grounding` measure's (`trb.track._grounding_measure`, with its strength sweep in
`_grounding_sweep`).

1. Direction. Run the model on fit contexts (train split) and take the hidden state at the
   position the report is read from, at layer l: d = mean(h | concept true) -
   mean(h | concept false) (a difference of means), and its unit vector u = d / |d|; beside
   it the RMS norm s of that layer's hidden states on the fit contexts, so an injection
   alpha * s * u has a strength alpha relative to the activations' own scale.
2. Detection AUC (Mann-Whitney): P(score_injected > score_control) + 1/2 P(tie), against the
   null (no injection) and against a norm-matched random direction.

The headline is declared before any result: the last hooked layer at alpha = 1
(`HEADLINE_ALPHA`), pooled over concepts, against the random control (the stricter one: it
discounts any score change a push of that size causes in an arbitrary direction).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from trustbench.trb.adapter._schema import StepContext
from trustbench.trb.corpus._format import Trace
from trustbench.trb.measures._whitebox import WhiteBox, capture

CONCEPTS: tuple[tuple[str, str, str], ...] = (
    ("goal", "right", "left"),
    ("belief", "closed", "open"),
)
"""(slot, injected value, the value it is injected into)."""
HEADLINE_ALPHA = 1.0
"""The declared strength of the headline AUC, relative to the layer's RMS hidden-state norm."""


def mann_whitney_auc(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """AUC = P(X > Y) + 1/2 P(X = Y) over all pairs; vectorised over leading axes.

    Equals U / (n_x n_y) of the Mann-Whitney U statistic (Hanley & McNeil 1982).
    """
    diff = x[..., :, None] - y[..., None, :]
    return (np.sign(diff) + 1).mean(axis=(-1, -2)) / 2


def _label(trace: Trace, index: int, slot: str) -> str:
    """The true slot value at the trace's `index`-th evaluated step (not its step number t)."""
    return getattr(trace.steps[index].r, slot)


def _fit_contexts(traces: Sequence[Trace], limit: int) -> list[tuple[StepContext, Trace, int]]:
    out = []
    for trace in traces[:limit]:
        for index, step in enumerate(trace.steps):
            out.append((trace.context(step.t), trace, index))
    return out


def concept_directions(
    box: WhiteBox, fit_traces: Sequence[Trace], *, fit_limit: int = 200
) -> dict[tuple[int, str], dict[str, Any]]:
    """Unit concept directions and activation scales per (layer index, slot)."""
    fit = _fit_contexts(fit_traces, fit_limit)
    contexts = [c for c, _, _ in fit]
    out: dict[tuple[int, str], dict[str, Any]] = {}
    for li, layer in enumerate(box.hook_layers()):
        with capture(layer, box.read_positions(contexts)) as seen:
            box.slot_probability(contexts, "goal", "right")
        h = seen[0]
        scale = float(h.pow(2).sum(-1).mean().sqrt())
        for slot, pos, _neg in CONCEPTS:
            mask = torch.tensor([_label(tr, t, slot) == pos for _, tr, t in fit])
            if mask.all() or not mask.any():
                continue
            d = h[mask].mean(0) - h[~mask].mean(0)
            out[(li, slot)] = {"unit": d / d.norm(), "norm": float(d.norm()), "scale": scale}
    return out
