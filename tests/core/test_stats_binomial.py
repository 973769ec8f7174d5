"""Binomial intervals and the Figure contract, against published and hand-derived values."""

import math

import pytest
from pydantic import ValidationError
from scipy.stats import norm

from trustbench.core.figures import Figure, not_run_figure, rate_figure
from trustbench.core.stats import binomial_interval, bounded_rate, zero_failure_upper_bound


def test_clopper_pearson_matches_nist_handbook_example() -> None:
    # NIST/SEMATECH e-Handbook §7.2.4.1: 4 defects in 20, 90% two-sided exact interval
    # (0.071354, 0.401029), quoted to six decimals (the exact Beta quantile is 0.4010281..., so
    # compare within one unit of the sixth decimal).
    interval = binomial_interval(4, 20, "clopper_pearson", 0.90)
    assert interval.lower == pytest.approx(0.071354, abs=1e-6)
    assert interval.upper == pytest.approx(0.401029, abs=1e-6)
    assert interval.sidedness == "two_sided"


def test_zero_failures_in_100_give_the_specs_one_sided_bound() -> None:
    # Spec: 1 - 0.05 ** (1/100) = 0.0295...; Clopper-Pearson one-sided at k = 0 is this bound.
    expected = 1 - 0.05 ** (1 / 100)
    interval = binomial_interval(0, 100, "clopper_pearson", 0.95, sidedness="upper")
    assert interval.lower == 0.0
    assert interval.upper == pytest.approx(expected, rel=1e-9)
    assert zero_failure_upper_bound(100) == pytest.approx(expected, rel=1e-12)
    assert round(expected, 4) == 0.0295


def test_one_sided_upper_bound_is_below_two_sided_upper_at_same_level() -> None:
    # One-sided puts all of alpha in one tail, so its bound is tighter than the two-sided one.
    one = binomial_interval(3, 40, sidedness="upper")
    two = binomial_interval(3, 40)
    assert one.upper is not None and two.upper is not None
    assert one.upper < two.upper


def test_wilson_interval_follows_the_score_formula() -> None:
    # Wilson (1927): centre (p + z^2/2n) / (1 + z^2/n), half-width
    # z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/4n^2).
    k, n, confidence = 4, 20, 0.90
    z = norm.ppf(1 - (1 - confidence) / 2)
    p = k / n
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z / (1 + z**2 / n) * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    interval = binomial_interval(k, n, "wilson", confidence)
    assert interval.lower == pytest.approx(centre - half, rel=1e-9)
    assert interval.upper == pytest.approx(centre + half, rel=1e-9)


def test_binomial_interval_with_no_units_is_not_computable_not_zero() -> None:
    interval = binomial_interval(0, 0)
    assert interval.lower is None and interval.upper is None
    assert interval.not_computable


def test_rate_figure_with_zero_denominator_is_not_applicable() -> None:
    figure = rate_figure(
        "unsupported_completion_claim_rate",
        0,
        0,
        description="verified completion claims",
        reason_if_empty="no completion claims were made",
    )
    assert figure.status == "not_applicable"
    assert figure.estimate is None
    assert figure.intervals == []
    assert figure.reason == "no completion claims were made"


def test_rate_figure_carries_counts_unit_and_exact_interval() -> None:
    figure = rate_figure(
        "false_approval_rate",
        3,
        20,
        unit="case",
        description="deny-reference cases",
        one_sided_upper=True,
    )
    assert (figure.numerator, figure.denominator, figure.unit_count) == (3, 20, 20)
    assert figure.estimate == pytest.approx(0.15)
    exact = figure.interval("clopper_pearson", 0.95)
    assert exact is not None and exact.lower < 0.15 < exact.upper
    assert figure.interval("clopper_pearson", 0.95, "upper") is not None
    assert figure.interval("wilson", 0.95) is not None


def test_unrun_figure_cannot_carry_a_zero() -> None:
    with pytest.raises(ValidationError):
        Figure(name="x", status="not_run", numerator=0, denominator=0, description="d")
    figure = not_run_figure("prohibited_effect_rate", description="d", reason="track not run")
    assert figure.model_dump()["estimate"] is None


def test_measured_figure_requires_a_positive_denominator() -> None:
    with pytest.raises(ValidationError):
        Figure(name="x", numerator=0, denominator=0, estimate=0.0, description="d")


def test_rate_figure_outside_zero_one_is_rejected() -> None:
    with pytest.raises(ValidationError, match=r"\[0, 1\]"):
        Figure(name="x", numerator=3, denominator=2, estimate=1.5, description="d")


def test_bounded_rate_keeps_unresolved_between_lower_and_upper() -> None:
    bounds = bounded_rate(
        0,
        2,
        100,
        name="prohibited_effect_rate",
        description="prohibited-action trials",
        deadline="30 s after dispatch",
    )
    assert bounds.lower.estimate == 0.0
    assert bounds.upper.estimate == pytest.approx(2 / 100)
    assert bounds.lower.denominator == bounds.upper.denominator == 100
    lower_bound = bounds.lower.interval("clopper_pearson", 0.95, "upper")
    assert lower_bound is not None
    # With 0 confirmed in 100, the lower figure's one-sided bound is 1 - 0.05 ** (1/100).
    assert lower_bound.upper == pytest.approx(1 - 0.05 ** (1 / 100), rel=1e-9)
    assert "30 s after dispatch" in bounds.upper.description
    with pytest.raises(ValueError):
        bounded_rate(5, 6, 10, name="x", description="d")


def test_both_binomial_intervals_agree_with_scipys_binomtest() -> None:
    # Computed from the Beta and normal quantiles (scipy.special) rather than through
    # scipy.stats (issue 55: its import was a fifth of `report`'s wall); binomtest solves for the
    # same bounds by root-finding, to within its tolerance.
    from scipy.stats import binomtest

    alternative = {"two_sided": "two-sided", "upper": "less", "lower": "greater"}
    for n in (1, 2, 7, 30):
        for k in range(n + 1):
            for side, name in alternative.items():
                for method, scipy_method in (("clopper_pearson", "exact"), ("wilson", "wilson")):
                    ours = binomial_interval(k, n, method, 0.9, sidedness=side)  # type: ignore[arg-type]
                    theirs = binomtest(k, n, alternative=name).proportion_ci(0.9, scipy_method)
                    assert ours.lower == pytest.approx(theirs.low, abs=1e-11)
                    assert ours.upper == pytest.approx(theirs.high, abs=1e-11)
