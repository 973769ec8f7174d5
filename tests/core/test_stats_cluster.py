"""Clustered intervals: cluster-robust t, seeded chunked bootstrap, sign-flip test and interval."""

import itertools
import tracemalloc

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.stats import t as student_t
from scipy.stats import ttest_1samp

from trustbench.core.stats import (
    bootstrap_ratio_distribution,
    cluster_bootstrap_interval,
    cluster_robust_interval,
    cluster_sums,
    clustered_figure,
    sign_flip_interval,
    sign_flip_pvalue,
)

# Three domain groups of 0/1 case outcomes: A = [1, 1, 0], B = [0, 0], C = [1, 0, 0, 0, 1].
ITEMS = [1, 1, 0, 0, 0, 1, 0, 0, 0, 1]
GROUPS = ["A", "A", "A", "B", "B", "C", "C", "C", "C", "C"]


def test_cluster_sums_collapse_items_in_first_appearance_order() -> None:
    y, m = cluster_sums(ITEMS, None, GROUPS)
    assert y.tolist() == [2, 0, 2] and m.tolist() == [3, 2, 5]


def test_cluster_robust_ratio_interval_matches_hand_derivation() -> None:
    # R = 4/10 = 0.4; residuals y - R m = 0.8, -0.8, 0 -> sum of squares 1.28;
    # Var = G/(G-1) * 1.28 / 10^2 = 1.5 * 0.0128 = 0.0192; half = t_{0.975, 2} * sqrt(0.0192).
    y, m = cluster_sums(ITEMS, None, GROUPS)
    half = student_t.ppf(0.975, 2) * np.sqrt(0.0192)
    interval = cluster_robust_interval(y, m)
    assert interval.lower == pytest.approx(0.4 - half)
    assert interval.upper == pytest.approx(0.4 + half)
    assert interval.groups == 3


def test_cluster_robust_ratio_variance_equals_statsmodels_cluster_ols() -> None:
    # Independent check: OLS of the item outcome on a constant with CR1 cluster-robust
    # covariance; with one regressor its correction (N-1)/(N-K) is 1, leaving G/(G-1).
    codes = [("A", "B", "C").index(g) for g in GROUPS]
    fit = sm.OLS(np.asarray(ITEMS, float), np.ones((10, 1))).fit(
        cov_type="cluster", cov_kwds={"groups": np.asarray(codes)}
    )
    y, m = cluster_sums(ITEMS, None, GROUPS)
    interval = cluster_robust_interval(y, m)
    half = (interval.upper - interval.lower) / 2
    assert half == pytest.approx(student_t.ppf(0.975, 2) * fit.bse[0], rel=1e-9)


def test_cluster_robust_with_unit_clusters_is_the_one_sample_t_interval() -> None:
    values = [0.2, 0.4, 0.6, 0.8, 0.75]
    y, m = cluster_sums(values)
    interval = cluster_robust_interval(y, m, confidence=0.9)
    expected = ttest_1samp(values, 0.0).confidence_interval(0.9)
    assert (interval.lower, interval.upper) == pytest.approx((expected.low, expected.high))


def test_cluster_robust_rate_is_clipped_and_says_so() -> None:
    y, m = cluster_sums(ITEMS, None, GROUPS)
    interval = cluster_robust_interval(y, m, clip=(0.0, 1.0))
    assert interval.lower == 0.0  # 0.4 - 0.596 < 0, clipped
    assert interval.note and "clipped" in interval.note


def test_cluster_robust_refuses_zero_variance_instead_of_a_zero_width_interval() -> None:
    y, m = cluster_sums([0, 0, 0, 0], None, ["a", "a", "b", "b"])
    interval = cluster_robust_interval(y, m)
    assert interval.lower is None and interval.not_computable


def test_cluster_robust_needs_two_clusters() -> None:
    y, m = cluster_sums([1, 0, 1], None, ["a", "a", "a"])
    assert cluster_robust_interval(y, m).not_computable == "fewer than two clusters"


def _fixture(size: int = 2_000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return (rng.random(size) < 0.2).astype(float), np.ones(size)


def test_bootstrap_is_reproducible_for_a_seed_and_differs_for_another() -> None:
    y, m = _fixture()
    first = cluster_bootstrap_interval(y, m, seed=11, resamples=500)
    again = cluster_bootstrap_interval(y, m, seed=11, resamples=500)
    other = cluster_bootstrap_interval(y, m, seed=12, resamples=500)
    assert first == again
    assert (first.lower, first.upper) != (other.lower, other.upper)
    assert (first.seed, first.resamples, first.method) == (
        11,
        500,
        "cluster_bootstrap_percentile",
    )


def test_bootstrap_equals_the_unchunked_definition_whatever_the_chunk_size() -> None:
    # Definition: B rows of G cluster indices drawn at once from PCG64(seed), statistic
    # sum(y[idx]) / sum(m[idx]) per row. Chunks must consume the stream identically.
    rng = np.random.default_rng(3)
    y = rng.integers(0, 4, size=50).astype(float)
    m = rng.integers(1, 5, size=50).astype(float)
    picks = np.random.default_rng(5).integers(0, 50, size=(300, 50), dtype=np.int32)
    reference = y[picks].sum(axis=1) / m[picks].sum(axis=1)
    for chunk in (50, 170, 1 << 20):
        stats, chunks = bootstrap_ratio_distribution(
            y, m, seed=5, resamples=300, chunk_elements=chunk
        )
        assert np.array_equal(stats, reference)
        assert chunks == -(-300 // max(1, chunk // 50))


def test_bootstrap_memory_stays_bounded_by_the_chunk_not_the_resamples() -> None:
    # 20,000 distinct values x 2,000 resamples would be 320 MB as one float64 matrix; in
    # chunks of 2^20 index entries the working set is a few MB.
    y, m = np.random.default_rng(8).random(20_000), np.ones(20_000)
    tracemalloc.start()
    try:
        stats, chunks = bootstrap_ratio_distribution(
            y, m, seed=1, resamples=2_000, chunk_elements=1 << 20
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert chunks == -(-2_000 // ((1 << 20) // 20_000))
    assert peak < 40 * 2**20
    assert stats.shape == (2_000,)


def test_bootstrap_percentile_interval_is_the_quantiles_of_the_distribution() -> None:
    y, m = cluster_sums(ITEMS, None, GROUPS)
    stats, _ = bootstrap_ratio_distribution(y, m, seed=2, resamples=400)
    interval = cluster_bootstrap_interval(y, m, seed=2, resamples=400, confidence=0.9)
    assert (interval.lower, interval.upper) == tuple(np.quantile(stats, [0.05, 0.95]))


def test_clustered_figure_reports_group_count_and_both_intervals() -> None:
    figure = clustered_figure(
        "false_approval_rate",
        ITEMS,
        None,
        GROUPS,
        description="deny-reference cases",
        cluster="domain_group",
        seed=4,
        resamples=200,
    )
    assert figure.estimate == pytest.approx(0.4)
    assert (figure.numerator, figure.denominator, figure.cluster) == (4, 10, "domain_group")
    assert {i.method for i in figure.intervals} == {
        "cluster_robust_t",
        "cluster_bootstrap_percentile",
    }
    assert all(i.groups == 3 for i in figure.intervals)


# Seven cluster differences: only -0.5 is negative.
DIFFS = np.array([1.0, 2.0, 3.0, -0.5, 1.5, 2.5, 0.7])


def _brute_force_p(d: np.ndarray, delta: float = 0.0) -> float:
    shifted = d - delta
    observed = abs(shifted.mean())
    flips = [abs((np.array(s) * shifted).mean()) for s in itertools.product((1, -1), repeat=d.size)]
    return sum(f >= observed - 1e-12 for f in flips) / len(flips)


def test_exact_sign_flip_p_value_counts_patterns_at_least_as_extreme() -> None:
    # Sum 10.2. Patterns with |sum| >= 10.2: identity, all flipped, and flipping only -0.5
    # (|sum| 11.2) with its negation; every other pattern lowers |sum|. So p = 4 / 2^7.
    result = sign_flip_pvalue(DIFFS)
    assert result.method == "sign_flip_exact" and result.patterns == 128
    assert result.p_value == pytest.approx(4 / 128)
    assert result.p_value == pytest.approx(_brute_force_p(DIFFS))


def test_exact_sign_flip_interval_ends_where_the_test_starts_rejecting() -> None:
    interval = sign_flip_interval(DIFFS)
    assert interval.lower is not None and interval.upper is not None
    for end, outward in ((interval.lower, -1), (interval.upper, +1)):
        assert _brute_force_p(DIFFS, end - outward * 1e-6) > 0.05
        assert _brute_force_p(DIFFS, end + outward * 1e-6) <= 0.05


def test_sign_flip_interval_with_too_few_clusters_is_not_computable() -> None:
    # Five clusters: the smallest exact two-sided p-value is 2/32 = 0.0625 > 0.05.
    interval = sign_flip_interval(np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert interval.lower is None and interval.upper is None
    assert "0.0625" in (interval.not_computable or "")


def test_monte_carlo_sign_flip_is_seeded_and_close_to_the_t_test() -> None:
    d = np.random.default_rng(0).normal(0.3, 1.0, 40)
    first = sign_flip_pvalue(d, seed=1)
    assert first.method == "sign_flip_monte_carlo" and first.seed == 1
    assert sign_flip_pvalue(d, seed=1) == first
    assert sign_flip_pvalue(d, seed=2).p_value != first.p_value
    interval = sign_flip_interval(d, seed=1)
    t_interval = ttest_1samp(d, 0.0).confidence_interval()
    assert interval.lower == pytest.approx(t_interval.low, abs=0.03)
    assert interval.upper == pytest.approx(t_interval.high, abs=0.03)


def test_sign_flip_without_seed_above_exact_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="seed"):
        sign_flip_pvalue(np.ones(17))


def test_clustered_intervals_refuse_zero_width_when_every_cluster_agrees() -> None:
    # Each group of two cases has exactly one event: all ratios 1/2, no between-group spread.
    y, m = cluster_sums([1, 0, 1, 0, 1, 0], None, ["a", "a", "b", "b", "c", "c"])
    bootstrap = cluster_bootstrap_interval(y, m, seed=1, resamples=100)
    flip = sign_flip_interval(y, m)
    robust = cluster_robust_interval(y, m)
    for interval in (bootstrap, flip, robust):
        assert interval.lower is None and interval.upper is None
        assert "same ratio" in (interval.not_computable or "")


def test_bootstrap_with_few_distinct_clusters_draws_multinomial_counts() -> None:
    # 0/1 outcomes: two distinct clusters (y, m) = (0, 1) and (1, 1). Definition: per
    # resample, counts of each distinct pair ~ Multinomial(G, multiplicities / G), pairs in
    # np.unique order.
    y, m = _fixture(1_000)
    ones = int(y.sum())
    counts = np.random.default_rng(4).multinomial(
        1_000, [(1_000 - ones) / 1_000, ones / 1_000], size=500
    )
    reference = counts[:, 1] / 1_000
    for chunk in (6, 100, 1 << 20):
        stats, _ = bootstrap_ratio_distribution(y, m, seed=4, resamples=500, chunk_elements=chunk)
        assert np.array_equal(stats, reference)


def test_both_bootstrap_draws_give_the_same_distribution() -> None:
    # Same data, once as 0/1 (few distinct pairs, multinomial path) and once with a tiny
    # distinct offset per cluster in y and m scaled away (index path). The bootstrap SD of a
    # proportion over G units is sqrt(p (1 - p) / G); both must be within 5% of it.
    y, m = _fixture(1_000)
    p = y.mean()
    expected = np.sqrt(p * (1 - p) / 1_000)
    few, _ = bootstrap_ratio_distribution(y, m, seed=1, resamples=4_000)
    jitter = np.arange(1_000) * 1e-9
    many, _ = bootstrap_ratio_distribution(y + jitter, m, seed=1, resamples=4_000)
    assert few.std() == pytest.approx(expected, rel=0.05)
    assert many.std() == pytest.approx(expected, rel=0.05)
