"""The distribution functions the report's statistics need, in pure Python (no scipy).

`trustbench report` of a reviewer run asked `scipy.special` for about 40 numbers: Beta quantiles
(Clopper-Pearson bounds), normal quantiles (Wilson's z, kappa intervals), Student's t quantiles
(cluster-robust intervals), a chi-square upper tail (Stuart-Maxwell) and a binomial distribution
function (exact McNemar). Importing `scipy.special` (it drags `numpy.f2py`) cost about 0.23 s of
the report's 2.2 s on the 2,000-trial run of `python -m bench.report_speed` (issue 55). They are
computed here with the `math` module instead, within 1e-13 of scipy's
(`tests/core/test_stats_distributions.py`); scipy stays the reference in the tests, and supplies
the t quantile past 1,000 degrees of freedom, where this module's loses digits.

Everything rests on the regularized incomplete Beta function I_x(a, b):
- the Beta quantile is its root in x (safeguarded Newton);
- with integer a, b it is a binomial tail, P[Bin(a + b - 1, x) >= a] (Abramowitz & Stegun
  26.5.24), summed term by term (every Clopper-Pearson bound, and McNemar's
  P[Bin(n, p) <= k] = 1 - I_p(k + 1, n - k));
- otherwise its continued fraction (A&S 26.5.8, Lentz's method): Student's t through
  P[T > t] = I_{df/(df+t^2)}(df/2, 1/2) / 2 (A&S 26.7.1).
The factor x^a (1-x)^b / B(a, b) in front of both is where a naive version loses precision
(log B(a, b) from `math.lgamma` is off by ~1e-9 relative at a + b = 10^6), so it is Loader's
(2000) saddle-point form, the one R's `dbinom` uses: Stirling's error terms and the deviance
`bd0`, with no cancellation between large logarithms. The chi-square upper tail of an integer df
has a closed form (A&S 26.4.4, 26.4.5); the normal quantile is `statistics.NormalDist`'s
(Wichura's AS241) refined by one Newton step.
"""

from __future__ import annotations

import math

_EPSILON = 2.0**-52
_TINY = 1e-300
_MAX_ITERATIONS = 100_000
_CONVERGED = 64 * _EPSILON
_MAX_PURE_T_DF = 1_000

# stirlerr(z) = log(z!) - log(sqrt(2 pi z) (z/e)^z) at z = 0, 1/2, 1, ..., 15, to double precision
# (mpmath at 50 digits); above 15 Stirling's series below is exact to double precision.
_STIRLING_ERROR_HALVES = (
    0.0,
    0.15342640972002736,
    0.08106146679532726,
    0.05481412105191765,
    0.0413406959554093,
    0.03316287351993629,
    0.02767792568499834,
    0.023746163656297496,
    0.020790672103765093,
    0.018488450532673187,
    0.016644691189821193,
    0.015134973221917378,
    0.013876128823070748,
    0.012810465242920227,
    0.01189670994589177,
    0.011104559758206917,
    0.010411265261972096,
    0.009799416126158804,
    0.009255462182712733,
    0.008768700134139386,
    0.00833056343336287,
    0.00793411456431402,
    0.007573675487951841,
    0.007244554301320383,
    0.00694284010720953,
    0.006665247032707682,
    0.006408994188004207,
    0.006171712263039458,
    0.0059513701127588475,
    0.0057462165130101155,
    0.005554733551962801,
)


def _stirling_error(z: float) -> float:
    """log(z!) - log(sqrt(2 pi z) (z/e)^z): a table up to 15, then 1/(12z) - 1/(360z^3) + ...

    For z that is not a multiple of 1/2 below 15, `math.lgamma` (absolute error ~1e-15 there).
    """
    if z <= 15.0:
        doubled = 2.0 * z
        if doubled == int(doubled):
            return _STIRLING_ERROR_HALVES[int(doubled)]
        return math.lgamma(z + 1.0) - (z + 0.5) * math.log(z) + z - 0.5 * math.log(2 * math.pi)
    inverse_square = 1.0 / (z * z)
    # R's stirlerr: as many terms of 1/12 - 1/(360 z^2) + 1/(1260 z^4) - 1/(1680 z^6) +
    # 1/(1188 z^8) as double precision needs at this z.
    series = 0.0
    for coefficient, above in ((1 / 1188, 35.0), (1 / 1680, 80.0), (1 / 1260, 500.0)):
        if z <= above:
            series = coefficient - series * inverse_square
    return (1 / 12 - (1 / 360 - series * inverse_square) * inverse_square) / z


def _deviance(x: float, mean: float) -> float:
    """Loader's bd0: x log(x / mean) + mean - x, summed as a series when x is near the mean.

    Near the mean the two halves cancel; the series (x - mean) v + 2x (v^3/3 + v^5/5 + ...) in
    v = (x - mean) / (x + mean) keeps every digit (Loader 2000, "Fast and accurate computation
    of binomial probabilities"). Loader switches at |v| < 0.1; up to |v| < 0.5 the series still
    converges in under 30 terms and is more accurate than the difference (at v = 0.14 the
    difference loses about 4 bits: 5e-15 relative on the Beta quantile's density at B(51, 0.5)).
    """
    if abs(x - mean) < 0.5 * (x + mean):
        ratio = (x - mean) / (x + mean)
        total = (x - mean) * ratio
        term = 2 * x * ratio
        ratio_squared = ratio * ratio
        for power in range(3, 2000, 2):
            term *= ratio_squared
            updated = total + term / power
            if updated == total:
                return total
            total = updated
        return total
    return x * math.log(x / mean) + mean - x


def _beta_kernel(a: float, b: float, x: float, complement: float) -> float:
    """x^a (1-x)^b / B(a, b), with a + b = c: sqrt(ab / (2 pi c)) exp(stirlerr terms - bd0 terms).

    From Stirling's formula for each Gamma in B(a, b) and a log x + b log(1 - x) =
    -bd0(a, cx) - bd0(b, c(1-x)) + a log(a/c) + b log(b/c), since cx + c(1-x) = a + b.
    `complement` is 1 - x, passed in so that a tiny 1 - x keeps its digits (1 - (1 - x) does
    not: at x = 6e-6, 1e-11 relative).
    """
    if x <= 0.0 or complement <= 0.0:
        return 0.0
    total = a + b
    exponent = (
        _stirling_error(total)
        - _stirling_error(a)
        - _stirling_error(b)
        - _deviance(a, total * x)
        - _deviance(b, total * complement)
    )
    return math.sqrt(a * b / (2 * math.pi * total)) * math.exp(exponent)


def _continued_fraction(a: float, b: float, x: float, complement: float) -> float:
    """The continued fraction of I_x(a, b) (A&S 26.5.8) by the modified Lentz method.

    It converges fast for x < (a + 1) / (a + b + 2); the caller uses the symmetry
    I_x(a, b) = 1 - I_{1-x}(b, a) on the other side. Its first denominator
    1 - (a + b) x / (a + 1) is written as (1 - b + (a + b)(1 - x)) / (a + 1) when 1 - x is the
    smaller of the two, whose digits are then exact.
    """
    correction = 1.0
    c = 1.0
    if x <= complement:
        d = 1.0 - (a + b) * x / (a + 1.0)
    else:
        d = (1.0 - b + (a + b) * complement) / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    fraction = d
    for m in range(1, _MAX_ITERATIONS):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            correction = c * d
            fraction *= correction
        if abs(correction - 1.0) < _EPSILON:
            return fraction
    return fraction


def beta_tails(a: float, b: float, x: float) -> tuple[float, float]:
    """(I_x(a, b), 1 - I_x(a, b)) for a, b > 0, the smaller of the two summed, the other 1 minus it.

    Integer a, b (every Clopper-Pearson bound) take the binomial identity
    I_x(a, b) = P[Bin(a + b - 1, x) >= a] (A&S 26.5.24), a sum of positive terms; others (Student's
    t) the continued fraction, which near x = 1 with a large a loses digits to cancellation (1e-11
    relative at I_x(999998, 3), x = 1 - 6e-6) where the sum loses none.
    """
    lower, upper, _ = _beta_tails_and_density(a, b, x)
    return lower, upper


def _beta_tails_and_density(a: float, b: float, x: float) -> tuple[float, float, float]:
    """`beta_tails` and the Beta(a, b) density at x, which Newton's step needs.

    One Loader evaluation gives both (a third of the Beta quantile's time, measured).
    """
    if x <= 0.0:
        return 0.0, 1.0, 0.0
    if x >= 1.0:
        return 1.0, 0.0, 0.0
    y = 1.0 - x
    if a == int(a) and b == int(b):
        return _binomial_tails(int(a), int(b), x, y)
    if x < (a + 1.0) / (a + b + 2.0):
        kernel = _beta_kernel(a, b, x, y)
        lower = kernel / a * _continued_fraction(a, b, x, y)
        return lower, 1.0 - lower, kernel / (x * y)
    kernel = _beta_kernel(b, a, y, x)
    upper = kernel / b * _continued_fraction(b, a, y, x)
    return 1.0 - upper, upper, kernel / (x * y)


def _binomial_tails(a: int, b: int, x: float, y: float) -> tuple[float, float, float]:
    """(P[Bin(n, x) >= a], P[Bin(n, x) < a], Beta(a, b) density at x), n = a + b - 1, y = 1 - x.

    The tail on the far side of the mean n x is summed from its first term outward, each term
    from the last by the ratio of successive binomial probabilities; the pmf falls ever faster
    there (it is log-concave), so the sum stops once the rest, bounded by a geometric series at
    the current ratio, is below 2^-60 of it: O(sqrt(n)) terms. The density is a P(a) / x =
    b P(a - 1) / y, P the binomial pmf, since 1 / B(a, b) = a C(n, a) = b C(n, a - 1).
    """
    trials = a + b - 1
    odds = x / y
    if a > trials * x:
        term = _binomial_probability(a, trials, x, y)
        density = a * term / x
        total = term
        for successes in range(a, trials):
            ratio = (trials - successes) / (successes + 1) * odds
            term *= ratio
            total += term
            if term * ratio <= (1.0 - ratio) * total * 2.0**-60:
                break
        return total, 1.0 - total, density
    term = _binomial_probability(a - 1, trials, x, y)
    density = b * term / y
    total = term
    for successes in range(a - 1, 0, -1):
        ratio = successes / ((trials - successes + 1) * odds)
        term *= ratio
        total += term
        if term * ratio <= (1.0 - ratio) * total * 2.0**-60:
            break
    return 1.0 - total, total, density


def _binomial_probability(successes: int, trials: int, x: float, y: float) -> float:
    """P[Bin(trials, x) = successes] by Loader's form (R's dbinom_raw), y = 1 - x.

    Inside the range it is x^i y^(n-i) / B(i, n-i) times n / (i (n-i)), since
    1 / B(i, n-i) = C(n, i) i (n-i) / n.
    """
    if successes == 0:
        return math.exp(trials * math.log1p(-x)) if x < y else y**trials
    if successes == trials:
        return x**trials if x < y else math.exp(trials * math.log1p(-y))
    failures = trials - successes
    return _beta_kernel(successes, failures, x, y) * trials / (successes * failures)


def beta_quantile(a: float, b: float, probability: float) -> float:
    """The x in (0, 1) with I_x(a, b) = probability: the Beta(a, b) quantile (scipy's betaincinv).

    Closed forms where a or b is 1 (I_x(a, 1) = x^a, I_x(1, b) = 1 - (1-x)^b); otherwise a
    Newton iteration on the smaller tail, started from A&S 26.5.22's normal approximation
    (Numerical Recipes 3rd ed. §6.14 `invbetai`), kept inside a bracket that shrinks with every
    evaluation and bisected when a step leaves it, until a step is below one unit in the last
    place, then one final step.

    Args:
        a: First shape parameter, > 0.
        b: Second shape parameter, > 0.
        probability: Target value of I_x(a, b), in [0, 1].

    Returns:
        The quantile (0 at probability 0, 1 at probability 1).
    """
    if probability <= 0.0:
        return 0.0
    if probability >= 1.0:
        return 1.0
    if b == 1.0:
        return probability ** (1.0 / a)
    if a == 1.0:
        return -math.expm1(math.log1p(-probability) / b)
    # Solve on the tail below 1/2, so the target is never a difference from 1.
    if probability <= 0.5:
        return _tail_root(a, b, probability, lower_tail=True)
    return _tail_root(a, b, 1.0 - probability, lower_tail=False)


def _tail_root(a: float, b: float, target: float, *, lower_tail: bool) -> float:
    """The x with I_x(a, b) = target (`lower_tail`) or 1 - I_x(a, b) = target (otherwise).

    Taking the tail as given keeps a small upper-tail target exact (1 - (1 - q) is not q).
    """
    low, high = 0.0, 1.0
    x = _initial_guess(a, b, target if lower_tail else 1.0 - target)
    for _ in range(200):
        lower, upper, density = _beta_tails_and_density(a, b, x)
        excess = lower - target if lower_tail else target - upper
        if excess == 0.0:
            return x
        if excess < 0.0:
            low = x
        else:
            high = x
        step = excess / density if density > 0.0 else math.inf
        if abs(step) <= _CONVERGED * x:
            # Newton's error after this step is of the order of step^2: below the last bit.
            return x - step
        x = x - step if low < x - step < high else 0.5 * (low + high)
    return x


def _initial_guess(a: float, b: float, probability: float) -> float:
    """A starting point for the Beta quantile: NR §6.14's, from A&S 26.5.22 when a, b >= 1."""
    if a >= 1.0 and b >= 1.0:
        tail = probability if probability < 0.5 else 1.0 - probability
        root = math.sqrt(-2.0 * math.log(tail))
        normal = (2.30753 + root * 0.27061) / (1.0 + root * (0.99229 + root * 0.04481)) - root
        normal = -normal if probability < 0.5 else normal
        shape = (normal * normal - 3.0) / 6.0
        harmonic = 2.0 / (1.0 / (2.0 * a - 1.0) + 1.0 / (2.0 * b - 1.0))
        w = normal * math.sqrt(shape + harmonic) / harmonic - (
            1.0 / (2.0 * b - 1.0) - 1.0 / (2.0 * a - 1.0)
        ) * (shape + 5.0 / 6.0 - 2.0 / (3.0 * harmonic))
        guess = a / (a + b * math.exp(2.0 * w))
    else:
        lower_share = math.exp(a * math.log(a / (a + b))) / a
        upper_share = math.exp(b * math.log(b / (a + b))) / b
        total = lower_share + upper_share
        if probability < lower_share / total:
            guess = (a * total * probability) ** (1.0 / a)
        else:
            guess = 1.0 - (b * total * (1.0 - probability)) ** (1.0 / b)
    return min(max(guess, 1e-300), 1.0 - _EPSILON)


def student_t_quantile(df: int, probability: float) -> float:
    """Student's t quantile at `probability` on `df` degrees of freedom (scipy's stdtrit).

    For the upper tail q = 1 - p: P[T > t] = I_x(df/2, 1/2) / 2 with x = df / (df + t^2)
    (A&S 26.7.1 with 26.5.1), so t = sqrt(df (1 - x) / x) for the x at which that tail is 2q.
    Within 1.3e-14 of scipy's up to df = 1,000 (a few to some tens of units in the last place:
    the continued fraction of I_x(df/2, 1/2) near x = 1 is the weak step); above, scipy's.

    Args:
        df: Degrees of freedom, >= 1.
        probability: Lower-tail probability in (0, 1).

    Returns:
        t with P[T <= t] = probability.
    """
    if df > _MAX_PURE_T_DF:
        # Past this the continued fraction near x = 1 loses digits (1.2e-12 at df = 10^5):
        # scipy's, imported on use (a report reaches it only with over 1,000 clusters).
        from scipy.special import stdtrit

        return float(stdtrit(df, probability))
    if probability == 0.5:
        return 0.0
    if probability < 0.5:
        return -student_t_quantile(df, 1.0 - probability)
    both_tails = 2.0 * (1.0 - probability)
    half_df = df / 2.0
    # P[|T| > t] = I_x(df/2, 1/2) = 1 - I_y(1/2, df/2), x = df / (df + t^2), y = 1 - x: solve
    # for the smaller of x and y, so that neither is a difference of near-equal numbers.
    y = _tail_root(0.5, half_df, both_tails, lower_tail=False)
    if y <= 0.5:
        return math.sqrt(df * y / (1.0 - y))
    x = _tail_root(half_df, 0.5, both_tails, lower_tail=True)
    return math.sqrt(df * (1.0 - x) / x)


def normal_quantile(probability: float) -> float:
    """The standard normal quantile (scipy's ndtri): `statistics.NormalDist`'s, refined once.

    `NormalDist().inv_cdf` (Wichura's AS241) is off by up to about 4 units in the last place
    (3.4 at 0.95); one Newton step on the smaller tail, Q(z) = erfc(z / sqrt 2) / 2, whose
    relative error is that of `math.erfc`, brings it within about one.
    """
    # On use: `run` and `--help` import this module (through `figures`) and need no quantile.
    from statistics import NormalDist

    z = NormalDist().inv_cdf(probability)
    tail = probability if probability < 0.5 else 1.0 - probability
    distance = abs(z)
    excess = 0.5 * math.erfc(distance / math.sqrt(2.0)) - tail
    density = math.exp(-0.5 * distance * distance) / math.sqrt(2.0 * math.pi)
    refined = distance + excess / density
    return refined if probability >= 0.5 else -refined


def chi_square_survival(df: int, statistic: float) -> float:
    """P[chi-square(df) > statistic] for an integer df (scipy's chdtrc).

    Even df: e^(-x/2) sum_{i < df/2} (x/2)^i / i! (A&S 26.4.5); odd df: erfc(sqrt(x/2)) +
    e^(-x/2) sum_{i=1}^{(df-1)/2} (x/2)^(i-1/2) / Gamma(i + 1/2) (A&S 26.4.4); sums of positive
    terms, each from the previous one by one multiplication. Past x = 1,417, e^(-x/2) is 0 in
    double precision and so is the result, which is right unless df is of the order of x (a
    Stuart-Maxwell table of over 1,000 categories).
    """
    if statistic <= 0.0:
        return 1.0
    half = statistic / 2.0
    if df % 2 == 0:
        term = math.exp(-half)
        total, shift, last = term, 0.0, df // 2
    else:
        term = math.exp(-half) * math.sqrt(half) / math.gamma(1.5)
        total = math.erfc(math.sqrt(half)) + (term if df > 1 else 0.0)
        shift, last = 0.5, (df - 1) // 2
    for index in range(1, last):
        term *= half / (index + shift)
        total += term
    return min(total, 1.0)


def binomial_cdf(k: int, n: int, probability: float) -> float:
    """P[Bin(n, probability) <= k] (scipy's bdtr): I_{1-p}(n-k, k+1), the upper Beta tail at p."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return beta_tails(k + 1.0, float(n - k), probability)[1]
