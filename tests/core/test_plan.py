"""The on-demand plan and its seeded order equal the held lists they stand in for (issue 30).

The references are the plain forms: a list of every key, `sorted()`, `trial_order` (sort, then
`Random(seed).shuffle`) and `json_sha256` of the sorted ids.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from trustbench._canonical import json_sha256
from trustbench.core import TrialKey, trial_order
from trustbench.core.spec._manifest import CrossProduct, SeededOrder

NAMES = st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=4, unique=True)


def held(cases: list[str], names: list[str], trials: int) -> list[TrialKey]:
    return [TrialKey(c, n, i) for c in cases for n in names for i in range(trials)]


@settings(max_examples=60, deadline=None)
@given(cases=NAMES, names=NAMES, trials=st.integers(0, 12), seed=st.integers(0, 2**32))
def test_seeded_order_of_a_cross_product_is_trial_order(
    cases: list[str], names: list[str], trials: int, seed: int
) -> None:
    plan = CrossProduct(cases, names, trials)
    assert list(plan) == held(cases, names, trials)
    assert list(plan.sorted()) == sorted(held(cases, names, trials))
    order = SeededOrder(plan, seed)
    expected = trial_order(held(cases, names, trials), seed)
    assert list(order) == expected
    assert [order[p] for p in range(len(order))] == expected
    assert order[2:5] == expected[2:5]


def test_seeded_order_of_a_plain_list_is_trial_order() -> None:
    keys = held(["b", "a", "c"], ["z", "y"], 3)[::-1]
    assert list(SeededOrder(keys, 7)) == trial_order(keys, 7)
    assert list(SeededOrder(keys, 7)) != list(SeededOrder(keys, 8))


@settings(max_examples=60, deadline=None)
@given(cases=NAMES, names=NAMES, trials=st.integers(0, 12))
def test_streamed_plan_digest_is_the_digest_of_the_sorted_ids(
    cases: list[str], names: list[str], trials: int
) -> None:
    digest = CrossProduct(cases, names, trials).ids_sha256()
    ids = sorted(key.trial_id for key in held(cases, names, trials))
    assert digest is None or digest == json_sha256(ids)


def test_an_impossible_cross_product_names_its_first_impossible_trial() -> None:
    from types import SimpleNamespace
    from typing import Any, cast

    import pytest

    from trustbench.core.spec._manifest import plan_record
    from trustbench.errors import InputError

    spec = cast(Any, SimpleNamespace(candidates=[SimpleNamespace(name="a")], trials_per_case=2))
    with pytest.raises(InputError, match=r"impossible trial c1/ghost/0$"):
        plan_record(CrossProduct(["c1", "c2"], ["ghost", "a"], 2), spec)
    assert plan_record(CrossProduct(["c1", "c2"], ["a"], 2), spec).trials == 4
