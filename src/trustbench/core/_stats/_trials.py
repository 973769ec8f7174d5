"""From K trials per case to per-case values, and pass^k.

Sixty cases run ten times are sixty cases, not six hundred: case-level intervals are computed
over per-case values, each obtained from that case's K trials by one declared reduction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import comb
from typing import Literal

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
