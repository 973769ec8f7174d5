"""Small numeric helpers shared by the tracks and the audit."""

from __future__ import annotations

from collections.abc import Mapping

from trustbench.trb.adapter._schema import ACTIONS


def total_variation(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """TV(p, q) = 1/2 sum_a |p(a) - q(a)| over the action set (in [0, 1])."""
    return 0.5 * sum(abs(float(p.get(a, 0.0)) - float(q.get(a, 0.0))) for a in ACTIONS)


def unique_argmax(p: Mapping[str, float], tol: float = 1e-9) -> str | None:
    """The single most likely action, or None on a tie (a tie has no hard answer)."""
    best = max(ACTIONS, key=lambda a: p[a])
    if sum(1 for a in ACTIONS if p[a] >= p[best] - tol) > 1:
        return None
    return best
