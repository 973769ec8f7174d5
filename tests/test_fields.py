"""`from_same_named`: which source supplies a field, and that a given field always wins."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic import BaseModel

from trustbench._fields import from_same_named, same_named_fields


class _Target(BaseModel):
    trial_id: str
    boundary: str
    termination: str
    note: str = ""


class _Run(BaseModel):
    trial_id: str
    boundary: str
    termination: dict[str, str]


class _Scenario(BaseModel):
    trial_id: str
    note: str


@dataclass(frozen=True)
class _Result:
    boundary: str
    note: str


def test_the_first_source_that_declares_a_field_supplies_it() -> None:
    run = _Run(trial_id="from-run", boundary="b", termination={"status": "x"})
    scenario = _Scenario(trial_id="from-scenario", note="n")
    assert same_named_fields(_Target, scenario, run) == {
        "trial_id": "from-scenario",
        "note": "n",
        "boundary": "b",
        "termination": {"status": "x"},
    }


def test_a_given_field_wins_over_a_same_named_one_of_another_meaning() -> None:
    run = _Run(trial_id="t", boundary="b", termination={"status": "agent_stopped"})
    built = from_same_named(_Target, run, termination=run.termination["status"])
    assert built == _Target(trial_id="t", boundary="b", termination="agent_stopped")


def test_a_dataclass_source_gives_its_fields_and_nothing_else() -> None:
    built = from_same_named(_Target, _Result(boundary="b", note="n"), trial_id="t", termination="s")
    assert built == _Target(trial_id="t", boundary="b", termination="s", note="n")


def test_a_misspelt_given_field_is_refused() -> None:
    with pytest.raises(TypeError, match="has no field boundry"):
        from_same_named(_Target, _Result(boundary="b", note=""), boundry="x")
