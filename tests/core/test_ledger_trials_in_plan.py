"""`LedgerContents.trials_in_plan`: each trial with its frozen case, a foreign case refused."""

from __future__ import annotations

from typing import Any

import pytest

from trustbench.core import LedgerContents
from trustbench.errors import CheckFailed


def _contents(*case_ids: str) -> LedgerContents:
    trials: list[dict[str, Any]] = [
        {"trial_id": f"c/{case}/0", "case_id": case, "status": "completed"} for case in case_ids
    ]
    return LedgerContents(rows=(trials, [], [], []))


def test_each_trial_comes_with_its_case_in_ledger_order() -> None:
    pairs = list(_contents("b", "a", "b").trials_in_plan({"a": 1, "b": 2}, "scenario"))
    assert [(trial["trial_id"], case) for trial, case in pairs] == [
        ("c/b/0", 2), ("c/a/0", 1), ("c/b/0", 2),
    ]  # fmt: skip


def test_a_trial_of_a_case_outside_the_plan_is_refused_naming_it() -> None:
    with pytest.raises(CheckFailed, match=r"trial c/z/0 names a trace outside the frozen plan"):
        list(_contents("a", "z").trials_in_plan({"a": 1}, "trace"))
