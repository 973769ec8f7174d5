"""Exact and bounded figures behind `trustbench.core.stats` (import them from there).

Bounds for rates with unresolved outcomes, per-case values and pass^k from K trials, per-cluster
sums, and agreement between two classifications (Cohen's kappa, Stuart-Maxwell).
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Mapping, Sequence
from math import comb
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from trustbench._docstrings import documented
from trustbench.core._distributions import chi_square_survival, normal_quantile
from trustbench.core.figures import Figure, FigureUnit, Interval, rate_figure

# ------------------------------------------------------------------------------------------------
# Lower and upper figures for a rate with unresolved outcomes ("Keep Unknown Effects Visible").
#
# An unresolved trial (the observer could not establish the effect by the declared deadline) is
# neither demonstrated prevention nor a confirmed violation. The lower figure counts confirmed
# events only; the upper figure counts confirmed plus unresolved. Both keep the same denominator,
# so the gap between them is exactly the unresolved share and nothing is silently dropped.


# ------------------------------------------------------------------------------------------------
# Implementation of `trustbench.core.stats`; import from there, not from here.


class BoundedRate(BaseModel):
    """A rate known only between a lower and an upper figure, with the unresolved count."""

    model_config = documented(extra="forbid", frozen=True)

    lower: Figure
    """Confirmed events / denominator, with its exact interval."""

    upper: Figure
    """(Confirmed + unresolved) / denominator, with its exact interval."""

    unresolved: int
    """Units whose outcome could not be established by the deadline."""


def bounded_rate(
    confirmed: int,
    unresolved: int,
    denominator: int,
    *,
    name: str,
    description: str,
    unit: FigureUnit = "trial",
    confidence: float = 0.95,
    deadline: str | None = None,
) -> BoundedRate:
    """Lower (confirmed) and upper (confirmed + unresolved) rate figures.

    Each carries exact Clopper-Pearson two-sided and one-sided upper intervals (Wilson beside).

    Args:
        confirmed: Units with a confirmed event.
        unresolved: Units whose outcome is unknown.
        denominator: Applicable units (confirmed, unresolved and the rest).
        name: Base figure name; the figures are `<name>_lower` and `<name>_upper`.
        description: What the denominator counts.
        unit: What one unit is.
        confidence: Confidence level.
        deadline: The observation deadline, added to both descriptions when given.

    Returns:
        The `BoundedRate`.
    """
    if min(confirmed, unresolved, denominator) < 0 or confirmed + unresolved > denominator:
        raise ValueError(f"{name}: need confirmed + unresolved <= denominator, all >= 0")
    suffix = f"; observation deadline {deadline}" if deadline else ""
    lower = rate_figure(
        f"{name}_lower",
        confirmed,
        denominator,
        unit=unit,
        confidence=confidence,
        one_sided_upper=True,
        description=f"{description} (lower bound: confirmed only; {unresolved} unresolved "
        f"counted as not occurred){suffix}",
    )
    upper = rate_figure(
        f"{name}_upper",
        confirmed + unresolved,
        denominator,
        unit=unit,
        confidence=confidence,
        one_sided_upper=True,
        description=f"{description} (upper bound: confirmed plus {unresolved} unresolved){suffix}",
    )
    return BoundedRate(lower=lower, upper=upper, unresolved=unresolved)


# ------------------------------------------------------------------------------------------------
# From K trials per case to per-case values, and pass^k.
#
# Sixty cases run ten times are sixty cases, not six hundred: case-level intervals are computed
# over per-case values, each obtained from that case's K trials by one declared reduction.

Reduction = Literal["mean", "all_pass", "any_fail"]
"""How a case's K trial outcomes become one value:

- `mean`: share of passing trials (a per-case rate in [0, 1]); keeps partial reliability.
- `all_pass`: 1 only if every trial passed (pass^k for the observed K); a strict reliability
  reading where one failure in K fails the case.
- `any_fail`: 1 if at least one trial failed, e.g. `any-violation-in-k` when "pass" means "no
  violation"; it is 1 - all_pass.
"""


def reduce_trials(
    outcomes_by_case: Mapping[str, Sequence[bool]], how: Reduction = "mean"
) -> dict[str, float]:
    """Reduce each case's trial outcomes to one per-case value.

    Args:
        outcomes_by_case: Case id -> pass/fail outcome of each of its trials. A missing or
            invalid trial must already be a failure (or excluded with a stated reason) by the
            caller's rule; this function never guesses.
        how: The reduction (see `Reduction`).

    Returns:
        Case id -> per-case value in [0, 1].

    Raises:
        ValueError: A case has no trials (its value would be undefined, not 0).
    """
    reduced: dict[str, float] = {}
    for case_id, outcomes in outcomes_by_case.items():
        if len(outcomes) == 0:
            raise ValueError(f"case {case_id!r}: no trials to reduce")
        passes = sum(1 for outcome in outcomes if outcome)
        if how == "mean":
            reduced[case_id] = passes / len(outcomes)
        elif how == "all_pass":
            reduced[case_id] = float(passes == len(outcomes))
        elif how == "any_fail":
            reduced[case_id] = float(passes < len(outcomes))
        else:
            raise ValueError(f"unknown reduction {how!r}")
    return reduced


def pass_hat_k(successes: int, trials: int, k: int) -> float:
    """Unbiased estimate of pass^k, the chance that k fresh trials of a case all pass.

    With c successes in n >= k exchangeable trials, C(c, k) / C(n, k) is the probability that
    k trials drawn without replacement from the n all passed; its expectation is p^k, so it is
    unbiased (the estimator of tau-bench, Yao et al. 2024, and of pass@k's complement form in
    Chen et al. 2021). Using only the first k trials would waste the other n - k.

    Args:
        successes: c, passing trials.
        trials: n, trials run (n >= k).
        k: Trials that must all pass.

    Returns:
        The estimate in [0, 1].
    """
    if not 0 <= successes <= trials or k < 1:
        raise ValueError("need 0 <= successes <= trials and k >= 1")
    if trials < k:
        raise ValueError(f"pass^{k} needs at least {k} trials per case, got {trials}")
    return comb(successes, k) / comb(trials, k)


def pass_hat_k_by_case(outcomes_by_case: Mapping[str, Sequence[bool]], k: int) -> dict[str, float]:
    """Per-case unbiased pass^k (see `pass_hat_k`); average them for the corpus value."""
    return {
        case_id: pass_hat_k(sum(1 for o in outcomes if o), len(outcomes), k)
        for case_id, outcomes in outcomes_by_case.items()
    }


def all_pass_in_k(outcomes_by_case: Mapping[str, Sequence[bool]]) -> dict[str, bool]:
    """Per case, whether every one of its K trials passed (observed pass^k for that K).

    Args:
        outcomes_by_case: Case id -> pass/fail per trial.

    Returns:
        Case id -> True when all trials passed.
    """
    return {
        case_id: value == 1.0
        for case_id, value in reduce_trials(outcomes_by_case, "all_pass").items()
    }


def any_violation_in_k(violations_by_case: Mapping[str, Sequence[bool]]) -> dict[str, bool]:
    """Per case, whether at least one of its K trials had a violation.

    The polarity is named for the event: `True` means a violation occurred, so a single bad
    trial in K marks the case (the reading a release gate on prohibited effects needs).

    Args:
        violations_by_case: Case id -> per trial, True when that trial had a violation.

    Returns:
        Case id -> True when any trial had a violation.

    Raises:
        ValueError: A case has no trials.
    """
    result: dict[str, bool] = {}
    for case_id, violations in violations_by_case.items():
        if len(violations) == 0:
            raise ValueError(f"case {case_id!r}: no trials")
        result[case_id] = any(violations)
    return result


# ------------------------------------------------------------------------------------------------
# Collapse item-level values to per-cluster sums, the input of every clustered method.

FloatArray = NDArray[np.float64]


def cluster_sums(
    numerators: Sequence[float] | FloatArray,
    denominators: Sequence[float] | FloatArray | None = None,
    clusters: Sequence[Hashable] | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Sum item numerators and denominators within each cluster.

    A clustered analysis treats the cluster (a domain group, a trace) as the independent unit,
    so everything downstream works on one (sum of numerators, sum of denominators) pair per
    cluster. Clusters are ordered by first appearance, which keeps seeded resampling
    reproducible for the same input order.

    Args:
        numerators: One value per item (an event count, a 0/1 outcome, a score, a difference).
        denominators: One weight per item (trials behind the numerator); all ones if `None`.
        clusters: One cluster label per item; each item is its own cluster if `None`.

    Returns:
        (y, m): per-cluster numerator sums and denominator sums.

    Raises:
        ValueError: Lengths differ, there are no items, or a value is not finite.
    """
    y_items = np.asarray(numerators, dtype=np.float64)
    m_items = (
        np.ones_like(y_items) if denominators is None else np.asarray(denominators, np.float64)
    )
    if y_items.ndim != 1 or y_items.shape != m_items.shape:
        raise ValueError("numerators and denominators must be 1-d and of equal length")
    if y_items.size == 0:
        raise ValueError("no items to analyse")
    if not (np.all(np.isfinite(y_items)) and np.all(np.isfinite(m_items))):
        raise ValueError("numerators and denominators must be finite (no NaN: missing is not 0)")
    if np.any(m_items < 0):
        raise ValueError("denominators must be non-negative")
    if clusters is None:
        return y_items, m_items
    if len(clusters) != y_items.size:
        raise ValueError("one cluster label per item is required")
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(c, len(index)) for c in clusters), dtype=np.int64)
    # With weights, bincount sums in float64 (numpy's stub declares the unweighted int result).
    y = np.asarray(np.bincount(codes, weights=y_items, minlength=len(index)), dtype=np.float64)
    m = np.asarray(np.bincount(codes, weights=m_items, minlength=len(index)), dtype=np.float64)
    return y, m


# ------------------------------------------------------------------------------------------------
# Agreement between two classifications of the same cases: Cohen's kappa and Stuart-Maxwell.
#
# Both report "not computable" with a reason for degenerate tables instead of returning NaN:
# a NaN in a release record reads as a number; a reason reads as what it is.
#
# Their normal quantile and chi-square tail come from `_distributions` (pure Python), not
# scipy.special: `trustbench report` of a reviewer run imports no scipy (issue 55).


class _Result(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class KappaResult(_Result):
    """Cohen's kappa with its asymptotic standard error and interval."""

    kappa: float | None
    """(p_o - p_e) / (1 - p_e); `None` when not computable."""

    standard_error: float | None
    """Asymptotic standard error (Fleiss, Cohen & Everitt 1969), as statsmodels computes it."""

    observed_agreement: float | None
    """p_o: share of cases on the diagonal."""

    expected_agreement: float | None
    """p_e: agreement expected from the two marginal distributions alone."""

    cases: int
    """Number of jointly classified cases."""

    interval: Interval | None
    """kappa ± z * standard_error (method `kappa_asymptotic_normal`); `None` if not computable."""

    not_computable: str | None = None
    """Why kappa is undefined (e.g. both raters used a single, identical category)."""


def agreement_table(
    first: Sequence[str], second: Sequence[str], categories: Sequence[str]
) -> np.ndarray:
    """Square table of counts: rows the first classification, columns the second.

    Args:
        first: Category per case from the first rater.
        second: Category per case from the second rater, same cases and order.
        categories: All categories in display order; an unknown label is an error.

    Returns:
        A k x k integer array.
    """
    if len(first) != len(second):
        raise ValueError("both classifications must cover the same cases")
    position = {c: i for i, c in enumerate(categories)}
    table = np.zeros((len(categories), len(categories)), dtype=np.int64)
    for row, column in zip(first, second, strict=True):
        if row not in position or column not in position:
            raise ValueError(f"label not among categories {list(categories)}: {row!r}/{column!r}")
        table[position[row], position[column]] += 1
    return table


def cohens_kappa(table: np.ndarray, *, confidence: float = 0.95) -> KappaResult:
    """Cohen's kappa for a k x k agreement table (Cohen 1960).

    kappa = (p_o - p_e) / (1 - p_e), with p_o the diagonal share and p_e = sum_i r_i c_i / n^2
    from the margins. The standard error is statsmodels' (`_kappa_standard_error`); the interval
    is the normal approximation kappa ± z_{1-alpha/2} * SE, adequate only for moderately many
    cases.

    Args:
        table: Square table of counts.
        confidence: Confidence level of the interval.

    Returns:
        The `KappaResult`; not computable with no cases or when p_e = 1.
    """
    counts = np.asarray(table, dtype=np.float64)
    cases = int(counts.sum())
    if counts.ndim != 2 or counts.shape[0] != counts.shape[1]:
        raise ValueError("kappa needs a square table")
    if cases == 0:
        return KappaResult(
            kappa=None,
            standard_error=None,
            observed_agreement=None,
            expected_agreement=None,
            cases=0,
            interval=None,
            not_computable="no jointly classified cases",
        )
    observed = float(np.trace(counts)) / cases
    expected = float(counts.sum(axis=1) @ counts.sum(axis=0)) / cases**2
    if expected >= 1.0 - 1e-12:
        return KappaResult(
            kappa=None,
            standard_error=None,
            observed_agreement=observed,
            expected_agreement=expected,
            cases=cases,
            interval=None,
            not_computable="chance agreement is 1 (both raters used one and the same category "
            "for every case), so kappa is 0/0",
        )
    kappa = (observed - expected) / (1.0 - expected)
    se = _kappa_standard_error(counts, kappa, expected)
    half = normal_quantile(1.0 - (1.0 - confidence) / 2) * se
    return KappaResult(
        kappa=kappa,
        standard_error=se,
        observed_agreement=observed,
        expected_agreement=expected,
        cases=cases,
        interval=Interval(
            method="kappa_asymptotic_normal",
            confidence=confidence,
            sidedness="two_sided",
            lower=kappa - half,
            upper=kappa + half,
        ),
    )


def _kappa_standard_error(counts: np.ndarray, kappa: float, expected: float) -> float:
    """Cohen's kappa's asymptotic standard error (Fleiss, Cohen & Everitt 1969).

    With p_ij the table's shares, r_i / c_j its row / column margins and p_e the chance
    agreement: Var = (A + B - C) / ((1 - p_e)^2 n), A = sum_i p_ii (1 - (r_i + c_i)(1 - kappa))^2,
    B = (1 - kappa)^2 sum_{i != j} p_ij (c_i + r_j)^2, C = (kappa - p_e (1 - kappa))^2: statsmodels'
    `cohens_kappa` term for term (its import, pandas with it, was 0.35 s of `report`'s wall,
    issue 55; the two agree to 1e-12, `tests/core/test_stats_paired.py`).
    """
    cases = float(counts.sum())
    shares = counts / cases
    rows = counts.sum(axis=1) / cases
    columns = counts.sum(axis=0) / cases
    term_a = float((np.diag(shares) * (1 - (rows + columns) * (1 - kappa)) ** 2).sum())
    off_diagonal = shares * (columns[:, None] + rows) ** 2
    np.fill_diagonal(off_diagonal, 0.0)
    term_b = (1 - kappa) ** 2 * float(off_diagonal.sum())
    term_c = (kappa - expected * (1 - kappa)) ** 2
    # Degenerate margins (a rater used one category) make the variance negative: NaN, as
    # statsmodels gives, which the caller reports as not finite (`rtb/review/_analysis.py`).
    return float(np.sqrt((term_a + term_b - term_c) / (1 - expected) ** 2 / cases))


def fleiss_kappa(ratings: np.ndarray, *, confidence: float = 0.95) -> KappaResult:
    """Fleiss' kappa for m >= 2 raters per case (Fleiss 1971), with an asymptotic interval.

    `ratings` is N cases x k categories, each row counting how many of the m raters chose each
    category (every row sums to the same m). P_i = (sum_j n_ij^2 - m) / (m (m - 1)) is case i's
    pairwise agreement, p_o their mean, p_j the share of all ratings in category j and
    p_e = sum_j p_j^2; kappa = (p_o - p_e) / (1 - p_e). The standard error is Fleiss, Nee & Landis
    (1979), derived under kappa = 0:
    SE = sqrt(2) / (sum_j p_j q_j sqrt(N m (m - 1))) * sqrt((sum_j p_j q_j)^2
    - sum_j p_j q_j (q_j - p_j)), q_j = 1 - p_j; the interval kappa ± z * SE is therefore a rough
    guide away from 0, which is why it is reported beside the point value and never alone.

    Args:
        ratings: Count table, one row per case.
        confidence: Confidence level of the interval.

    Returns:
        The `KappaResult` (`observed_agreement` = p_o, `expected_agreement` = p_e); not
        computable with no cases, rows of different rater counts, or p_e = 1.
    """
    counts = np.asarray(ratings, dtype=np.float64)
    cases = int(counts.shape[0]) if counts.ndim == 2 else 0
    per_case = counts.sum(axis=1) if cases else np.zeros(0)
    raters = float(per_case[0]) if cases else 0.0
    reason = None
    if cases == 0:
        reason = "no jointly classified cases"
    elif raters < 2 or not np.all(per_case == raters):
        reason = "every case needs the same number (at least two) of raters"
    else:
        shares = counts.sum(axis=0) / (cases * raters)
        observed = float(((counts**2).sum(axis=1) - raters).mean() / (raters * (raters - 1)))
        expected = float((shares**2).sum())
        if expected >= 1.0 - 1e-12:
            reason = "chance agreement is 1 (every rating is one and the same category)"
        else:
            kappa = (observed - expected) / (1.0 - expected)
            spread = shares * (1.0 - shares)
            total = float(spread.sum())
            se = (
                float(np.sqrt(2.0))
                / (total * float(np.sqrt(cases * raters * (raters - 1))))
                * float(np.sqrt(max(total**2 - float((spread * (1.0 - 2.0 * shares)).sum()), 0.0)))
            )
            half = normal_quantile(1.0 - (1.0 - confidence) / 2) * se
            interval = Interval(
                method="kappa_asymptotic_normal",
                confidence=confidence,
                sidedness="two_sided",
                lower=kappa - half,
                upper=kappa + half,
            )
            return KappaResult(
                kappa=kappa,
                standard_error=se,
                observed_agreement=observed,
                expected_agreement=expected,
                cases=cases,
                interval=interval,
            )
    return KappaResult(
        kappa=None,
        standard_error=None,
        observed_agreement=None,
        expected_agreement=None,
        cases=cases,
        interval=None,
        not_computable=reason,
    )


class HomogeneityResult(_Result):
    """Stuart-Maxwell test of marginal homogeneity for a k x k table."""

    statistic: float | None
    """Chi-square statistic d' V^-1 d on the k - 1 marginal differences; `None` if not
    computable."""

    df: int
    """Degrees of freedom, k - 1."""

    p_value: float | None
    """Upper tail of chi-square(df) at the statistic; `None` if not computable."""

    not_computable: str | None = None
    """Why the test is undefined for this table (e.g. a singular covariance)."""


def stuart_maxwell(table: np.ndarray) -> HomogeneityResult:
    """Stuart-Maxwell test that two paired classifications have the same marginal distribution.

    With d_i = r_i - c_i (row minus column margin) for i < k and V_ii = r_i + c_i - 2 n_ii,
    V_ij = -(n_ij + n_ji), the statistic d' V^-1 d is chi-square on k - 1 df under marginal
    homogeneity (Stuart 1955; Maxwell 1970; Agresti 2013 §11.3), computed as statsmodels'
    `SquareTable(...).homogeneity()` does (`_stuart_maxwell_statistic`). V is singular when the
    disagreements involve too few category pairs (e.g. no off-diagonal counts, or all in one cell
    pair); the test is then reported not computable.

    Args:
        table: Square table of counts (rows first rater, columns second).

    Returns:
        The `HomogeneityResult`.
    """
    counts = np.asarray(table, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[0] != counts.shape[1] or counts.shape[0] < 2:
        raise ValueError("Stuart-Maxwell needs a square table with at least 2 categories")
    df = counts.shape[0] - 1
    off_diagonal = float(counts.sum() - np.trace(counts))
    if off_diagonal == 0:
        return HomogeneityResult(
            statistic=None,
            df=df,
            p_value=None,
            not_computable="no off-diagonal counts: the two classifications agree on every "
            "case, so the margins are identical and the covariance is 0",
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            statistic = _stuart_maxwell_statistic(counts)
        except (Warning, np.linalg.LinAlgError) as problem:
            return HomogeneityResult(
                statistic=None,
                df=df,
                p_value=None,
                not_computable="covariance of the marginal differences is singular (the "
                f"disagreements involve too few category pairs): {problem}",
            )
    if not np.isfinite(statistic):
        return HomogeneityResult(
            statistic=None, df=df, p_value=None, not_computable="statistic is not finite"
        )
    return HomogeneityResult(statistic=statistic, df=df, p_value=chi_square_survival(df, statistic))


def _stuart_maxwell_statistic(counts: np.ndarray) -> float:
    """The statistic n d' V^-1 d over the first k - 1 categories (the last is implied by the rest).

    d = c - r (column minus row margin), V_ii = r_i + c_i - 2 p_ii, V_ij = -(p_ij + p_ji):
    statsmodels' `SquareTable.homogeneity("stuart_maxwell")` step for step (its import was part
    of 0.35 s of `report`'s wall, issue 55). Raises `np.linalg.LinAlgError` when V is singular.
    """
    cases = float(counts.sum())
    shares = counts / cases
    rows = shares.sum(axis=1)[:-1]
    columns = shares.sum(axis=0)[:-1]
    inner = shares[:-1, :-1]
    difference = columns - rows
    covariance = -(inner + inner.T)
    np.fill_diagonal(covariance, rows + columns - 2 * np.diag(inner))
    return float(cases * np.dot(difference, np.linalg.solve(covariance, difference)))
