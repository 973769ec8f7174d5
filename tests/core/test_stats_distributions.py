"""The pure-Python distribution functions the report uses, against scipy and exact arithmetic.

`trustbench report` no longer imports scipy (issue 55); these tests keep scipy as the reference:
every Clopper-Pearson bound within 1e-13 of `scipy.special.betaincinv`, and, where the exact
answer can be computed in rationals, within a few units in the last place of it.
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import cycle

import numpy as np
import pytest
from scipy.special import bdtr, betaincinv, chdtrc, ndtri, stdtrit

from trustbench.core._binomial import binomial_interval
from trustbench.core._distributions import (
    beta_quantile,
    binomial_cdf,
    chi_square_survival,
    normal_quantile,
    student_t_quantile,
)

CONFIDENCES = (0.8, 0.9, 0.95, 0.99, 0.999)
SIDES = ("two_sided", "upper", "lower")


def _clopper_pearson_arguments(k: int, n: int, confidence: float, side: str) -> list[tuple]:
    """The (a, b, q) of each Beta quantile `_binomial._bounds` asks for at k/n, as it asks."""
    tail = (1.0 - confidence) / 2 if side == "two_sided" else 1.0 - confidence
    arguments = []
    if k > 0 and side != "upper":
        arguments.append((k, n - k + 1, tail))
    if k < n and side != "lower":
        arguments.append((k + 1, n - k, 1 - tail))
    return arguments


def _assert_matches_scipy(arguments: list[tuple]) -> None:
    a, b, q = (np.array(column, dtype=np.float64) for column in zip(*arguments, strict=True))
    theirs = betaincinv(a, b, q)
    ours = np.array([beta_quantile(*argument) for argument in arguments])
    worst = int(np.argmax(np.abs(ours - theirs)))
    assert abs(ours[worst] - theirs[worst]) <= 1e-13, (arguments[worst], ours[worst])


def test_clopper_pearson_bounds_match_scipy_for_every_count_up_to_200_trials() -> None:
    # Every k of every n in 1..200; the 15 (confidence, sidedness) pairs take turns along the
    # grid (all 15 on every n would be 0.4 million quantiles, ~35 s here; checked once so).
    pairs = cycle([(confidence, side) for confidence in CONFIDENCES for side in SIDES])
    arguments = []
    for n in range(1, 201):
        for k in range(n + 1):
            arguments += _clopper_pearson_arguments(k, n, *next(pairs))
    _assert_matches_scipy(arguments)


def test_clopper_pearson_bounds_match_scipy_up_to_a_million_trials() -> None:
    arguments = []
    for n in (1_000, 12_345, 100_000, 1_000_000):
        counts = {0, 1, 2, 3, n // 2 - 1, n // 2, n // 2 + 1, n - 3, n - 2, n - 1, n}
        for k in sorted(counts):
            for confidence in (0.9, 0.95, 0.999):
                for side in SIDES:
                    arguments += _clopper_pearson_arguments(k, n, confidence, side)
    _assert_matches_scipy(arguments)


def _binomial_upper_tail(a: int, b: int, x: Fraction) -> Fraction:
    """I_x(a, b) = P[Bin(a + b - 1, x) >= a], exactly."""
    trials = a + b - 1
    return sum(
        (math.comb(trials, i) * x**i * (1 - x) ** (trials - i) for i in range(a, trials + 1)),
        Fraction(0),
    )


@pytest.mark.parametrize(("a", "b"), [(2, 2), (2, 30), (3, 18), (17, 34), (19, 32), (40, 21)])
def test_beta_quantile_is_within_three_units_in_the_last_place_of_the_exact_root(
    a: int, b: int
) -> None:
    # I_x(a, b) is a polynomial in x for integer a, b, so the root's neighbours can be checked in
    # rationals: I(x - 3 ulp) < q < I(x + 3 ulp). Most are within one (scipy's own misses by 1.6
    # to 2.3 ulp at (16, 35), (17, 34), (18, 33) and (19, 32), the report's bounds at 50 cases);
    # three where the tail is far from the mean, its density's exponent large (Loader's form).
    for q in (0.0005, 0.025000000000000022, 0.05, 0.5, 0.95, 0.975, 0.9995):
        x = beta_quantile(a, b, q)
        below = Fraction(x - 3 * math.ulp(x))
        above = Fraction(x + 3 * math.ulp(x))
        assert _binomial_upper_tail(a, b, below) < Fraction(q) < _binomial_upper_tail(a, b, above)


def test_zero_and_all_events_take_the_closed_forms() -> None:
    # I_x(1, b) = 1 - (1-x)^b and I_x(a, 1) = x^a: the k = 0 upper and k = n lower bounds.
    assert beta_quantile(1, 100, 0.95) == -math.expm1(math.log1p(-0.95) / 100)
    assert beta_quantile(100, 1, 0.05) == 0.05 ** (1 / 100)
    interval = binomial_interval(0, 100, sidedness="upper")
    assert interval.upper == pytest.approx(1 - 0.05 ** (1 / 100), rel=1e-15)


def test_normal_quantile_matches_scipys_ndtri() -> None:
    for confidence in CONFIDENCES:
        for probability in (confidence, 0.5 + 0.5 * confidence, 1 - confidence):
            ours = normal_quantile(probability)
            assert ours == pytest.approx(float(ndtri(probability)), abs=1e-15, rel=2e-16)


def test_student_t_quantile_matches_scipys_stdtrit() -> None:
    # Up to df = 1,000 computed here (within 1.3e-14, or 1e-14 relative where t > 1); above,
    # scipy's own function.
    for df in [*range(1, 101), 150, 500, 999, 1_000, 1_001, 100_000]:
        for confidence in CONFIDENCES:
            for probability in (confidence, 0.5 + 0.5 * confidence, 1 - confidence):
                theirs = float(stdtrit(df, probability))
                ours = student_t_quantile(df, probability)
                assert ours == pytest.approx(theirs, rel=1e-14, abs=2e-14), (df, probability)


def test_chi_square_survival_matches_scipys_chdtrc() -> None:
    for df in range(1, 41):
        for statistic in (0.0, 1e-3, 0.5, 1.0, 3.84, 10.0, 32.000000000000014, 80.0, 300.0):
            theirs = float(chdtrc(df, statistic))
            ours = chi_square_survival(df, statistic)
            assert ours == pytest.approx(theirs, rel=1e-13, abs=1e-300), (df, statistic)


def test_binomial_cdf_at_one_half_is_the_exact_sum() -> None:
    # McNemar's exact p-value: P[Bin(n, 1/2) <= k] = sum C(n, i) / 2^n, and scipy's bdtr.
    for n in (1, 2, 5, 32, 99, 400):
        for k in range(0, n + 1, max(1, n // 25)):
            exact = float(Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2**n))
            assert binomial_cdf(k, n, 0.5) == pytest.approx(exact, rel=1e-14)
            assert binomial_cdf(k, n, 0.5) == pytest.approx(float(bdtr(k, n, 0.5)), rel=1e-13)
