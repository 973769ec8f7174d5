"""Paired comparisons, agreement statistics and trial reduction, against hand derivations."""

import math

import numpy as np
import pytest
from scipy.stats import binom, norm

from trustbench.core.stats import (
    agreement_table,
    all_pass_in_k,
    any_violation_in_k,
    cohens_kappa,
    mcnemar_exact,
    paired_cluster_bootstrap_ci,
    paired_difference,
    pass_hat_k,
    pass_hat_k_by_case,
    reduce_trials,
    stuart_maxwell,
)


def test_exact_mcnemar_is_binomial_on_discordant_pairs() -> None:
    # 8 first-only, 2 second-only discordant, 5 concordant of each kind.
    # Two-sided exact: 2 * P(X <= 2 | n = 10, 1/2) = 2 * (1 + 10 + 45) / 1024 = 0.109375.
    first = [True] * 8 + [False] * 2 + [True] * 5 + [False] * 5
    second = [False] * 8 + [True] * 2 + [True] * 5 + [False] * 5
    result = mcnemar_exact(first, second)
    assert (result.first_only, result.second_only, result.both, result.neither) == (8, 2, 5, 5)
    assert result.p_value == pytest.approx(112 / 1024)


def test_mcnemar_without_discordant_pairs_is_p_one() -> None:
    assert mcnemar_exact([True, False], [True, False]).p_value == 1.0


def _fleiss_cohen_everitt_se(table: np.ndarray) -> float:
    # Asymptotic SE of unweighted kappa (Fleiss, Cohen & Everitt 1969, eq. 13):
    # var = [sum_i p_ii (1 - (p_i. + p_.i)(1 - k))^2 + (1 - k)^2 sum_{i != j} p_ij
    #        (p_.i + p_j.)^2 - (k - p_e (1 - k))^2] / (n (1 - p_e)^2)
    n = table.sum()
    p = table / n
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    pe = float(rows @ cols)
    kappa = (np.trace(p) - pe) / (1 - pe)
    diag = sum(p[i, i] * (1 - (rows[i] + cols[i]) * (1 - kappa)) ** 2 for i in range(len(p)))
    off = sum(
        p[i, j] * (cols[i] + rows[j]) ** 2 for i in range(len(p)) for j in range(len(p)) if i != j
    )
    var = (diag + (1 - kappa) ** 2 * off - (kappa - pe * (1 - kappa)) ** 2) / (n * (1 - pe) ** 2)
    return math.sqrt(var)


def test_cohens_kappa_matches_hand_computation() -> None:
    # p_o = 35/50 = 0.7; margins rows (25, 25), cols (30, 20): p_e = (750 + 500)/2500 = 0.5;
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4.
    table = np.array([[20, 5], [10, 15]])
    result = cohens_kappa(table)
    assert result.kappa == pytest.approx(0.4)
    assert (result.observed_agreement, result.expected_agreement) == pytest.approx((0.7, 0.5))
    assert result.standard_error == pytest.approx(_fleiss_cohen_everitt_se(table))
    half = norm.ppf(0.975) * result.standard_error
    assert result.interval is not None
    assert (result.interval.lower, result.interval.upper) == pytest.approx((0.4 - half, 0.4 + half))


def test_cohens_kappa_on_a_single_shared_category_is_not_computable() -> None:
    result = cohens_kappa(np.array([[20, 0], [0, 0]]))
    assert result.kappa is None and result.interval is None
    assert "chance agreement is 1" in (result.not_computable or "")


def test_agreement_table_counts_pairs_and_rejects_unknown_labels() -> None:
    table = agreement_table(
        ["permit", "deny", "hold"], ["permit", "hold", "hold"], ["permit", "deny", "hold"]
    )
    assert table.tolist() == [[1, 0, 0], [0, 0, 1], [0, 0, 1]]
    with pytest.raises(ValueError):
        agreement_table(["permit"], ["maybe"], ["permit", "deny", "hold"])


def test_stuart_maxwell_matches_hand_computation() -> None:
    # Row margins (13, 13, 11), column margins (14, 11, 12): d = (-1, 2) for the first two.
    # V = [[13+14-20, -(2+3)], [-(2+3), 13+11-16]] = [[7, -5], [-5, 8]], det 31,
    # V^-1 = [[8, 5], [5, 7]] / 31, so chi2 = (8*1 - 2*5*2 + 7*4) / 31 = 16/31, df 2,
    # and p = exp(-chi2 / 2) for 2 degrees of freedom.
    result = stuart_maxwell(np.array([[10, 2, 1], [3, 8, 2], [1, 1, 9]]))
    assert result.statistic == pytest.approx(16 / 31)
    assert result.df == 2
    assert result.p_value == pytest.approx(math.exp(-8 / 31))


def test_stuart_maxwell_on_perfect_agreement_is_not_computable_with_a_reason() -> None:
    result = stuart_maxwell(np.diag([5, 5, 5]))
    assert result.statistic is None and result.p_value is None
    assert "agree on every case" in (result.not_computable or "")


def test_stuart_maxwell_with_disagreement_in_one_cell_pair_is_not_computable() -> None:
    # One off-diagonal count: V = [[1, -1], [-1, 1]] is singular.
    result = stuart_maxwell(np.array([[5, 1, 0], [0, 5, 0], [0, 0, 5]]))
    assert result.statistic is None and "singular" in (result.not_computable or "")


def test_paired_difference_attaches_three_clustered_intervals_and_a_test() -> None:
    # Per-case false approvals of A and B on 8 cases in 4 groups; A is worse in every group.
    groups = ["g1", "g1", "g2", "g2", "g3", "g3", "g4", "g4"]
    a = [1, 1, 1, 0, 1, 1, 1, 0]
    b = [0, 0, 0, 0, 1, 0, 0, 0]
    figure, test = paired_difference(
        "false_approval_rate_difference",
        a,
        b,
        clusters=groups,
        description="deny cases",
        cluster="domain_group",
        seed=3,
        resamples=300,
    )
    # Differences sum to 5 over 8 cases.
    assert figure.estimate == pytest.approx(5 / 8)
    assert figure.kind == "difference"
    assert [i.method for i in figure.intervals] == [
        "cluster_robust_t",
        "sign_flip_exact",
        "cluster_bootstrap_percentile",
    ]
    # Four clusters, all positive: exact two-sided p = 2 / 2^4.
    assert test.p_value == pytest.approx(2 / 16)
    # ...so the exact 95% sign-flip interval cannot be bounded (2/16 > 0.05).
    assert figure.intervals[1].not_computable


def test_paired_cluster_bootstrap_ci_resamples_whole_clusters() -> None:
    # Every item in a cluster has the same difference, so any resample's mean difference is
    # a weighted mean of the cluster values 0.1 and 0.3: the interval stays within them.
    clusters = ["t1", "t1", "t2", "t2"]
    interval = paired_cluster_bootstrap_ci(
        [0.5, 0.5, 0.7, 0.7], [0.4, 0.4, 0.4, 0.4], clusters, seed=9, resamples=200
    )
    assert 0.1 - 1e-12 <= interval.lower <= interval.upper <= 0.3 + 1e-12
    assert (interval.seed, interval.resamples, interval.groups) == (9, 200, 2)


def test_reduce_trials_mean_all_pass_and_any_fail() -> None:
    outcomes = {"c1": [True, True, False], "c2": [True, True, True]}
    assert reduce_trials(outcomes, "mean") == pytest.approx({"c1": 2 / 3, "c2": 1.0})
    assert reduce_trials(outcomes, "all_pass") == {"c1": 0.0, "c2": 1.0}
    assert reduce_trials(outcomes, "any_fail") == {"c1": 1.0, "c2": 0.0}
    with pytest.raises(ValueError, match="c3"):
        reduce_trials({"c3": []})


def test_pass_hat_k_is_the_tau_bench_combinatorial_estimator() -> None:
    # c = 3 of n = 5 passed, k = 2: C(3, 2) / C(5, 2) = 3 / 10.
    assert pass_hat_k(3, 5, 2) == pytest.approx(0.3)
    assert pass_hat_k_by_case({"c": [True, True, False, True, False]}, 2) == {"c": 0.3}
    with pytest.raises(ValueError):
        pass_hat_k(2, 2, 3)


def test_pass_hat_k_is_unbiased_for_p_to_the_k() -> None:
    # E[C(c, k) / C(n, k)] over c ~ Binomial(n, p) equals p^k.
    p, n, k = 0.3, 6, 3
    expectation = sum(binom.pmf(c, n, p) * pass_hat_k(c, n, k) for c in range(n + 1))
    assert expectation == pytest.approx(p**k)


def test_all_pass_and_any_violation_in_k_name_their_polarity() -> None:
    assert all_pass_in_k({"c1": [True, False], "c2": [True, True]}) == {"c1": False, "c2": True}
    violations = {"c1": [False, False, True], "c2": [False, False, False]}
    assert any_violation_in_k(violations) == {"c1": True, "c2": False}
    with pytest.raises(ValueError, match="c3"):
        any_violation_in_k({"c3": []})


def test_kappa_stuart_maxwell_and_mcnemar_agree_with_the_libraries_they_replace() -> None:
    # `report` computes these through scipy.special alone (issue 55: scipy.stats and statsmodels
    # cost a third of its wall); the figures must stay statsmodels' and scipy's own.
    from scipy.stats import binomtest
    from statsmodels.stats.contingency_tables import SquareTable
    from statsmodels.stats.inter_rater import cohens_kappa as statsmodels_kappa

    generator = np.random.default_rng(55)
    for _ in range(10):
        table = generator.integers(0, 30, size=(3, 3)) + np.diag(generator.integers(5, 40, 3))
        ours, theirs = cohens_kappa(table), statsmodels_kappa(table)
        assert ours.kappa == pytest.approx(float(theirs["kappa"]), rel=1e-12)
        assert ours.standard_error == pytest.approx(float(theirs["std_kappa"]), rel=1e-12)
        homogeneity = SquareTable(table.astype(float), shift_zeros=False).homogeneity()
        result = stuart_maxwell(table)
        assert result.statistic == pytest.approx(float(homogeneity.statistic), rel=1e-10)
        assert result.p_value == pytest.approx(float(homogeneity.pvalue), rel=1e-8, abs=1e-15)
    for discordant in (1, 2, 9, 10, 31):
        for first_only in range(discordant + 1):
            first = [True] * first_only + [False] * (discordant - first_only)
            p_value = mcnemar_exact(first, [not hit for hit in first]).p_value
            expected = binomtest(first_only, discordant, 0.5).pvalue
            assert p_value == pytest.approx(expected, rel=1e-11)
