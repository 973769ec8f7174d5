"""Records of a graded control-path run: one graded trial and one harness self-check."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from trustbench.rtb.boundaries import Enforcement
from trustbench.rtb.control._grading import (
    ControlOutcome,
    TrialGrade,
)

if TYPE_CHECKING:
    pass


OUTCOMES: tuple[str, ...] = tuple(outcome.value for outcome in ControlOutcome)
"""Outcome columns, in display order."""


class _Frozen(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)


class GradedTrial(_Frozen):
    """One ledger trial with its grade (a row of `record.json`'s `control.trials`)."""

    trial_id: str
    """Ledger trial id `scenario/candidate/index`."""
    candidate: str
    """Candidate (subject) name."""
    trial_index: int
    """Repetition index."""
    group: str
    """Domain group of the scenario's case."""
    status: Literal["completed", "failed"]
    """Ledger status; a failed trial has no observer log and is graded unresolved."""
    error_class: str | None
    """Why a failed trial failed."""
    grade: TrialGrade
    """The grade from the observer log (or the unresolved grade of a failed trial)."""
    enforcement: Enforcement | None = None
    """What the boundary declared it is in this trial's stored run (`Boundary.enforcement`);
    `None` for a failed trial, which has no run."""


class HarnessCheck(_Frozen):
    """A check of the measurement path made from this run's own grades."""

    name: str
    """What is checked."""
    status: Literal["passed", "failed", "not_run"]
    """`failed` is a harness defect; `not_run` when this run had no trial to check it with."""
    detail: str
    """What was measured."""
