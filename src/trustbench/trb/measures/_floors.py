"""What ignoring r can score on Track 1: the universal bounds printed beside G and G*.

G = 1 - mean TV(act(c, r'), Phi(r')) has a high floor: an adapter that never looks at r'
still agrees with Phi(r') on the actions every edit leaves alone. Two adapter-independent
references make that floor visible, both computed exactly from the stored Phi(r'):

- the r-ignoring ceiling: the highest G that *any* policy ignoring r can reach on these
  items. Such a policy gives one distribution q_t per step whatever r' says, so its best
  score is 1 - (1/N) sum_t min_q sum_k TV(q, Phi(r'_k)) over the step's counterfactuals k;
- the uniform score: G of q = 1/3 everywhere, 1 - mean TV(U, Phi(r')).

An adapter whose G does not clear the ceiling has shown nothing an r-blind policy could not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np

from trustbench.trb.adapter._schema import ACTIONS


def _matrix(continuations: Sequence[Mapping[str, float]]) -> np.ndarray:
    return np.array([[float(p[a]) for a in ACTIONS] for p in continuations], dtype=float)


def min_sum_tv(continuations: Sequence[Mapping[str, float]]) -> float:
    """The minimum over the simplex of sum_k TV(q, p_k): the best one r-blind answer can do.

    The objective is convex and piecewise linear in q; its pieces change only where some
    coordinate q_a crosses a breakpoint p_k[a] (or the boundary 0). On the 2-simplex a vertex
    of that arrangement fixes two coordinates at breakpoints (the third is 1 minus their sum),
    and a convex piecewise-linear function attains its minimum on a polygon at such a vertex.
    Enumerating every pair of coordinates and every pair of breakpoints is therefore exact:
    3 (K + 1)^2 candidates for K continuations.

    Args:
        continuations: The Phi(r'_k) of one step (action -> probability).

    Returns:
        The minimum of sum_k TV(q, p_k); 0.0 for no continuation.
    """
    if not continuations:
        return 0.0
    p = _matrix(continuations)
    candidates = []
    for i, j in combinations(range(len(ACTIONS)), 2):
        (k,) = set(range(len(ACTIONS))) - {i, j}
        bi = np.unique(np.concatenate([[0.0], p[:, i]]))
        bj = np.unique(np.concatenate([[0.0], p[:, j]]))
        qi, qj = np.meshgrid(bi, bj, indexing="ij")
        q = np.zeros((qi.size, len(ACTIONS)))
        q[:, i], q[:, j] = qi.ravel(), qj.ravel()
        q[:, k] = 1.0 - q[:, i] - q[:, j]
        candidates.append(q[q[:, k] >= -1e-12])
    q = np.clip(np.concatenate(candidates), 0.0, None)
    # TV(q, p) = 1/2 sum_a |q_a - p_a|, summed over the K continuations, for every candidate.
    total = 0.5 * np.abs(q[:, None, :] - p[None, :, :]).sum(axis=(1, 2))
    return float(total.min())


def uniform_sum_tv(continuations: Sequence[Mapping[str, float]]) -> float:
    """sum_k TV(U, p_k) for the uniform policy U = 1/3 per action."""
    if not continuations:
        return 0.0
    p = _matrix(continuations)
    return float(0.5 * np.abs(p - 1.0 / len(ACTIONS)).sum())
