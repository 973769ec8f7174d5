"""Agreement between two classifications of the same cases: Cohen's kappa and Stuart-Maxwell.

Both report "not computable" with a reason for degenerate tables instead of returning NaN:
a NaN in a release record reads as a number; a reason reads as what it is.

scipy and statsmodels are imported where they are used: `core.stats` re-exports these functions,
and `trustbench run`, which computes no statistics, must not pay for their import
(tests/test_run_imports.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from trustbench.core.figures import Interval


class _Result(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)


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
    from the margins. statsmodels computes the standard error; the interval is the normal
    approximation kappa ± z_{1-alpha/2} * SE, adequate only for moderately many cases.

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
    from scipy.stats import norm
    from statsmodels.stats.inter_rater import cohens_kappa as _sm_cohens_kappa

    result = _sm_cohens_kappa(counts)
    kappa = float(result["kappa"])
    se = float(result["std_kappa"])
    half = float(norm.ppf(1.0 - (1.0 - confidence) / 2)) * se
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
    homogeneity (Stuart 1955; Maxwell 1970; Agresti 2013 §11.3). Computed by statsmodels
    `SquareTable(...).homogeneity()`. V is singular when the disagreements involve too few
    category pairs (e.g. no off-diagonal counts, or all in one cell pair); the test is then
    reported not computable.

    Args:
        table: Square table of counts (rows first rater, columns second).

    Returns:
        The `HomogeneityResult`.
    """
    from scipy.stats import chi2
    from statsmodels.stats.contingency_tables import SquareTable

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
            # statsmodels' result object sets its fields at run time (its class declares none).
            square = SquareTable(counts, shift_zeros=False)
            bunch = vars(square.homogeneity(method="stuart_maxwell"))
        except (Warning, np.linalg.LinAlgError) as problem:
            return HomogeneityResult(
                statistic=None,
                df=df,
                p_value=None,
                not_computable="covariance of the marginal differences is singular (the "
                f"disagreements involve too few category pairs): {problem}",
            )
    statistic = float(bunch["statistic"])
    if not np.isfinite(statistic):
        return HomogeneityResult(
            statistic=None, df=df, p_value=None, not_computable="statistic is not finite"
        )
    return HomogeneityResult(
        statistic=statistic, df=int(bunch["df"]), p_value=float(chi2.sf(statistic, bunch["df"]))
    )
