from __future__ import annotations

import numpy as np
import pytest

from trustbench.trb.measures import cluster_bootstrap, governance_gap
from trustbench.trb.measures._governance import ratio


def test_gap_interval_excludes_zero_for_a_consistent_improvement() -> None:
    rng = np.random.default_rng(0)
    n = np.full(50, 24.0)
    full = rng.uniform(0.5, 1.5, 50)
    ablation = full + rng.uniform(2.0, 6.0, 50)
    gap = governance_gap(full, ablation, n, seed=1, resamples=500)
    assert gap["estimate"] == pytest.approx((ablation - full).sum() / n.sum())
    assert 0 < gap["low"] <= gap["estimate"] <= gap["high"]
    assert gap["sign_flip_p"] < 0.01


def test_gap_of_identical_models_is_zero_and_not_significant() -> None:
    tv = np.linspace(1, 5, 40)
    gap = governance_gap(tv, tv, np.full(40, 24.0), seed=1, resamples=500)
    assert gap["estimate"] == 0.0
    assert gap["sign_flip_p"] == 1.0


def test_gap_with_symmetric_noise_is_not_significant() -> None:
    rng = np.random.default_rng(4)
    full = rng.uniform(0, 5, 60)
    ablation = full + rng.normal(0, 1, 60)
    ablation -= (ablation - full).mean()  # exactly zero mean difference
    gap = governance_gap(full, ablation, np.full(60, 24.0), seed=2, resamples=1000)
    assert gap["low"] < 0 < gap["high"]
    assert gap["sign_flip_p"] > 0.5


def test_bootstrap_is_reproducible_and_records_method_seed_and_resamples() -> None:
    rng = np.random.default_rng(1)
    counts = np.column_stack([rng.uniform(0, 1, 30), rng.uniform(1, 2, 30)])
    a = cluster_bootstrap(counts, ratio, seed=9, resamples=300)
    b = cluster_bootstrap(counts, ratio, seed=9, resamples=300)
    assert a == b
    assert (a["method"], a["seed"], a["resamples"], a["clusters"]) == (
        "trace-clustered percentile bootstrap", 9, 300, 30
    )  # fmt: skip


def test_single_cluster_has_no_interval() -> None:
    result = cluster_bootstrap(np.array([[1.0, 2.0]]), ratio, seed=0, resamples=100)
    assert result["estimate"] == 0.5
    assert result["low"] is None and result["high"] is None
