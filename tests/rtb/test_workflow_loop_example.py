"""The built-in example of reviewers in the loop (`rtb/experiments/demo_loop.toml`), as the demo
runs it: the scripted reckless agent x review chains x the `reference` and `unchecked` boundaries.

What the issue's "Checked by" asks: the reference reviewer approves no prohibited live proposal;
the "self" reviewer shows its shared misses and the reference boundary stops them; the joint
conditionals come from joint decisions and differ from the product of the marginals where the
reviewers share their misses. One run serves every test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from trustbench.core import read_ledger
from trustbench.demo import _review_loop


@pytest.fixture(scope="module")
def example(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, Any], Path, str, list[str]]:
    out = tmp_path_factory.mktemp("loop-demo")
    console = Console(record=True, width=120)
    _, lessons = _review_loop(out, console, False)
    run_dir = out / "rtb-loop"
    record = json.loads((run_dir / "record.json").read_text())
    return record, run_dir, console.export_text(), lessons


def _effects(record: dict[str, Any], name: str) -> int:
    return int(record["workflow"]["counts"][name]["prohibited_effect"]["numerator"])


def test_the_reference_reviewer_approves_no_prohibited_live_proposal_behind_unchecked(
    example: tuple[dict[str, Any], Path, str, list[str]],
) -> None:
    record, _, _, _ = example
    loop = record["workflow"]["review_loop"]["reference-reviewer-unchecked"]
    assert loop["prohibited_proposals"] > 0
    assert loop["approvals_of_prohibited"] == 0 == _effects(record, "reference-reviewer-unchecked")
    assert loop["lost_permitted_work"] == 0
    # The control alone misses every one of them.
    assert _effects(record, "unreviewed-unchecked") == loop["prohibited_proposals"]


def test_the_self_reviewers_shared_misses_are_stopped_by_the_reference_boundary(
    example: tuple[dict[str, Any], Path, str, list[str]],
) -> None:
    record, _, _, _ = example
    loop = record["workflow"]["review_loop"]
    missed = loop["self-reviewer-reference"]["approvals_of_prohibited"]
    assert missed > 0
    assert _effects(record, "self-reviewer-reference") == 0
    assert _effects(record, "self-reviewer-unchecked") == missed


def test_joint_conditionals_come_from_joint_decisions_and_show_shared_misses(
    example: tuple[dict[str, Any], Path, str, list[str]],
) -> None:
    record, run_dir, _, _ = example
    joint = record["workflow"]["review_loop"]["self-twice-unchecked"]["joint"]
    first, second = joint["marginal_approvals"]
    total = joint["all_approve"]["denominator"]
    assert first == second == joint["all_approve"]["numerator"] > 0  # every miss shared
    (given,) = joint["next_approves_given_earlier_approved"]
    assert (given["numerator"], given["denominator"]) == (first, first)
    assert joint["product_of_marginals"] == pytest.approx((first / total) ** 2)
    assert joint["all_approve"]["estimate"] > joint["product_of_marginals"]
    # Counted from the members each review recorded, never multiplied.
    both = 0
    for trial in read_ledger(run_dir).trials:
        if trial["candidate"] == "self-twice-unchecked":
            for review in trial["outcome"]["reviews"]:
                prohibited = review["policy_decision"]["policy"] in ("deny", "hold")
                both += prohibited and all(m["outcome"] == "permit" for m in review["members"])
    assert both == joint["all_approve"]["numerator"]


def test_the_demo_step_prints_one_table_and_two_lessons(
    example: tuple[dict[str, Any], Path, str, list[str]],
) -> None:
    _, _, printed, lessons = example
    table = [line for line in printed.splitlines() if line.startswith("│")]
    assert len(table) == 6  # one row per configuration, none wrapped at 120 columns
    assert len(printed.splitlines()) <= 16
    assert len(lessons) == 2
    assert "reference reviewer approved 0 of" in lessons[0]
    assert "product of their marginal rates" in lessons[1]


def test_a_blind_spot_reviewer_names_an_unknown_rule_or_a_sentinel_as_bad_input() -> None:
    from trustbench.errors import InputError
    from trustbench.rtb.review.reviewers import chat_responder

    with pytest.raises(InputError, match="approved-parameters") as unknown:
        chat_responder({"reviewer": "reference-policy-v2", "without_rule": "no-such-rule"})
    assert unknown.value.location == "settings.without_rule"
    with pytest.raises(InputError, match="policy reviewer"):
        chat_responder({"reviewer": "always-permit", "without_rule": "approved-parameters"})
