"""Properties that must hold for every input, checked with hypothesis."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from trustbench.core.stats import (
    binomial_interval,
    cluster_bootstrap_interval,
    cluster_robust_interval,
    pass_hat_k,
)


@st.composite
def _counts(draw: st.DrawFn) -> tuple[int, int]:
    n = draw(st.integers(min_value=1, max_value=500))
    return draw(st.integers(min_value=0, max_value=n)), n


@given(_counts(), st.sampled_from(["clopper_pearson", "wilson"]))
def test_binomial_interval_contains_the_estimate_within_zero_one(
    counts: tuple[int, int], method: str
) -> None:
    k, n = counts
    interval = binomial_interval(k, n, method, 0.95)
    assert interval.lower is not None and interval.upper is not None
    assert 0.0 <= interval.lower <= k / n <= interval.upper <= 1.0


@given(_counts())
def test_exact_interval_is_no_shorter_at_a_higher_level(counts: tuple[int, int]) -> None:
    k, n = counts
    narrow = binomial_interval(k, n, confidence=0.90)
    wide = binomial_interval(k, n, confidence=0.99)
    assert wide.lower <= narrow.lower + 1e-12 and wide.upper >= narrow.upper - 1e-12


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(1, 5)).filter(lambda t: t[0] <= t[1]),
        min_size=2,
        max_size=12,
    ),
    st.integers(0, 2**31),
)
def test_bootstrap_percentile_stays_within_the_cluster_ratios(
    clusters: list[tuple[int, int]], seed: int
) -> None:
    y = np.array([c[0] for c in clusters], float)
    m = np.array([c[1] for c in clusters], float)
    interval = cluster_bootstrap_interval(y, m, seed=seed, resamples=200)
    ratios = y / m
    if interval.not_computable:
        assert np.allclose(ratios, ratios[0])
        return
    assert ratios.min() - 1e-12 <= interval.lower <= interval.upper <= ratios.max() + 1e-12
    robust = cluster_robust_interval(y, m, clip=(0.0, 1.0))
    assert robust.lower <= y.sum() / m.sum() <= robust.upper


@given(st.integers(1, 30), st.data())
def test_pass_hat_k_never_exceeds_observed_pass_rate(n: int, data: st.DataObject) -> None:
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    assert 0.0 <= pass_hat_k(c, n, k) <= c / n + 1e-12
