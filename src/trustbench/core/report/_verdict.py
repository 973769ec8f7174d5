"""One verdict per gated subject, read from the gate results: what the top of a report says.

A candidate's verdict is, in this order of precedence: `not_run` (none of its trials ran: no
evidence, never a pass), `incomplete` (the run holds fewer trials than it planned: nothing it
shows is a release decision, whatever its gates read), `not_evaluable` (a gate could not be
read, e.g. its valid-response rate is below the declared minimum: its error rates mean
nothing), `blocked` (a gate failed), or `passed` (every gate it is held to passed; a subject no
gate applies to is `no_gates`, not passed). Measurement instruments (sentinels, known-bad
boundaries, scripted agents) are judged apart: one built to fail (`expected_to_fail`) that fails
or cannot be evaluated on some gate is `as_expected`, and one that passes every gate is a
`harness_problem`, because the gates then do not tell it from a good candidate. An instrument
not built to fail (a reckless scripted agent against an enforcing boundary) gets the ordinary
reading of its gates, shown as an instrument. Only blocking gates decide a verdict: an
informational gate (`GateSpec.blocking = false`) is named in the headline when it did not pass
("does not block"), and never turns a failed or unreadable subject into a passing one.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from trustbench.core._analysis import VALID_RESPONSE_RATE, Evaluability
from trustbench.core.gates import GateResult
from trustbench.core.report._blocks import ReportPage

VerdictStatus = Literal[
    "passed",
    "blocked",
    "not_evaluable",
    "not_run",
    "no_gates",
    "as_expected",
    "harness_problem",
    "incomplete",
]
"""A subject's verdict (see the module docstring for the precedence)."""


class Verdict(BaseModel):
    """The verdict of one subject with the gate results it rests on."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

    subject: str
    """Configuration (candidate or instrument) name."""
    instrument: bool
    """Whether the subject is a measurement instrument (shown apart, never a candidate)."""
    expected_to_fail: bool = False
    """Whether the instrument is built to fail a gate (its failing gates block nothing)."""
    status: VerdictStatus
    """The verdict."""
    headline: str
    """The verdict in words, naming the gates it rests on."""
    gates: list[GateResult]
    """The subject's gate results, failed first."""
    evaluability: Evaluability | None = None
    """Its valid-response counts, when the track reports them."""


_ORDER = {"failed": 0, "not_evaluable": 1, "passed": 2}

INCOMPLETE_EXIT = 4
"""Exit code of `report` for an incomplete run (planned trials not run): distinct from a failed
gate (1), so a pipeline can tell "finish the run" from "the candidate failed"."""


def withhold_pass(gate: GateResult, incomplete: str) -> GateResult:
    """A gate of an incomplete run: a pass becomes not evaluable (partial evidence passes none)."""
    if gate.status != "passed":
        return gate
    return gate.model_copy(
        update={
            "status": "not_evaluable",
            "reason": f"{gate.reason} (run incomplete: {incomplete}; a partial run passes no gate)",
        }
    )


def report_exit_code(complete: bool, blocked: bool) -> int:
    """`report`'s exit code: `INCOMPLETE_EXIT` for an incomplete run, else 1 blocked, else 0."""
    return INCOMPLETE_EXIT if not complete else (1 if blocked else 0)


def gate_names(results: list[GateResult], among: list[GateResult] | None = None) -> list[str]:
    """The gates' declared names (`name`, else the metric), as the spec and gate table show them.

    Two gates that read the same (an unnamed pair on one metric) are told apart by what they
    compare, e.g. `false_approval_rate (upper <= 0.05)`, so a reader sees which one failed.

    Args:
        results: The gates to name.
        among: All the subject's gates (the ones a name must be unique among); default `results`.
    """
    seen = [declared_name(r) for r in (results if among is None else among)]
    names = [declared_name(r) for r in results]
    return [
        name
        if seen.count(name) < 2
        else f"{name} ({r.spec.bound} {r.spec.comparison} {r.spec.threshold:g})"
        for name, r in zip(names, results, strict=True)
    ]


def declared_name(result: GateResult) -> str:
    """The gate's name as the spec declares it (`name`, else the metric).

    Without the ` (<subject>)` the per-subject evaluation appends: a verdict names its subject.
    """
    label = result.spec.label
    suffix = f" ({result.subject})"
    return label[: -len(suffix)] if result.subject and label.endswith(suffix) else label


def _named(results: list[GateResult]) -> list[tuple[GateResult, str]]:
    return list(zip(results, gate_names(results), strict=True))


def _labels(results: list[GateResult], among: list[GateResult] | None = None) -> str:
    return ", ".join(gate_names(results, among))


def _informational(gates: list[GateResult]) -> str:
    """`; informational gate X not passed (does not block)`, or "" when every one passed."""
    missed = [g for g in gates if not g.spec.blocking and g.status != "passed"]
    if not missed:
        return ""
    plural = "s" if len(missed) > 1 else ""
    return f"; informational gate{plural} {_labels(missed, gates)} not passed (does not block)"


def _candidate(gates: list[GateResult], not_run: bool) -> tuple[VerdictStatus, str]:
    # Only blocking gates decide the status; informational ones are named after it.
    held = [g for g in gates if g.spec.blocking]
    failed = [g for g in held if g.status == "failed"]
    unreadable = [g for g in held if g.status == "not_evaluable"]
    unanswered = [g for g in failed if g.spec.metric == VALID_RESPONSE_RATE]
    if not_run:
        return "not_run", "not run: no trial of this configuration ran (no evidence either way)"
    if unanswered:  # the implicit evaluability gate: no other gate of it can be read
        why = unanswered[0].reason.split(": ", 1)[-1]  # the reason names its subject first
        return "not_evaluable", f"not evaluable: {why}, so none of its other gates can be read"
    if unreadable:
        return "not_evaluable", (
            f"not evaluable: {_labels(unreadable, gates)} could not be read "
            f"({unreadable[0].reason})"
        )
    note = _informational(gates)
    if failed:
        return "blocked", f"blocked by gate {_labels(failed, gates)}{note}"
    if not held or all(g.spec.metric == VALID_RESPONSE_RATE for g in held):
        # The implicit evaluability gate says it answered; it is not a release gate.
        answered = " (it answered: valid-response rate passed)" if held else ""
        return "no_gates", f"no release gate applies to this configuration{answered}{note}"
    kind = " blocking" if len(held) < len(gates) else ""
    return "passed", f"passed all {len(held)}{kind} gate(s){note}"


def _instrument(gates: list[GateResult], not_run: bool) -> tuple[VerdictStatus, str]:
    # Failing only an informational gate does not tell an instrument from a good candidate.
    missed = [g for g in gates if g.blocks]
    if not_run:
        return "not_run", "not run: this instrument's signature was not checked"
    if missed:
        return "as_expected", f"failed as expected: {_labels(missed, gates)}"
    if not any(g.spec.blocking for g in gates):
        return "no_gates", f"no release gate applies to this instrument{_informational(gates)}"
    return "harness_problem", (
        "HARNESS PROBLEM: this instrument passed every gate it should fail; the gates do not tell "
        "it from a good candidate"
    )


def subject_verdicts(page: ReportPage) -> list[Verdict]:
    """One verdict per subject: the page's subjects in order, then any other gated subject.

    Args:
        page: The report page (gate results carry their `subject`).

    Returns:
        Verdicts, candidates and instruments together in subject order.
    """
    order = list(page.subjects)
    order += [g.subject for g in page.gates if g.subject and g.subject not in order]
    verdicts = []
    for subject in dict.fromkeys(order):
        gates = sorted(
            (g for g in page.gates if g.subject == subject), key=lambda g: _ORDER[g.status]
        )
        instrument = subject in page.instruments
        built_to_fail = subject in page.expected_to_fail
        judge = _instrument if built_to_fail else _candidate
        status, headline = judge(gates, subject in page.not_run)
        if page.incomplete is not None and not built_to_fail and status != "not_run":
            failing = [g for g in gates if g.status == "failed" and g.spec.blocking]
            status, headline = (
                "incomplete",
                (
                    f"incomplete: {page.incomplete}; no gate counts as passed"
                    + (f" (already failing: {_labels(failing, gates)})" if failing else "")
                ),
            )
        if page.verdict_note:
            headline = f"{page.verdict_note}; {headline}"
        verdicts.append(
            Verdict(
                subject=subject,
                instrument=instrument,
                expected_to_fail=built_to_fail,
                status=status,
                headline=headline,
                gates=gates,
                evaluability=page.evaluability.get(subject),
            )
        )
    return verdicts


def release_blocked(gates: list[GateResult], verdicts: list[Verdict]) -> bool:
    """Whether the release is blocked: the one rule behind the exit code and the page's banner.

    Blocked when any blocking gate failed or could not be read (never passed by default), except
    the gates of instruments built to fail, whose failing is the harness working; informational
    gates (`blocking = false`) are reported and never block; and blocked when one of
    those passed every gate (a harness problem: the gates cannot tell it from a good candidate),
    and blocked when the run is incomplete.
    An instrument expected to pass (an honest scripted agent, a governed oracle) that fails a gate
    blocks like a candidate: something it relies on is wrong.
    """
    if any(v.status in ("harness_problem", "incomplete") for v in verdicts):
        return True
    built_to_fail = {v.subject for v in verdicts if v.expected_to_fail}
    return any(g.blocks for g in gates if g.subject not in built_to_fail)


def report_summary(result: Any) -> dict[str, Any]:
    """The compact machine summary `trustbench report RUN --json` prints (for CI).

    Args:
        result: A `ReportResult` (typed loosely: `_report_run` imports this package).

    Returns:
        Plain JSON: record and page paths, completeness, whether release is blocked and the
        exit code that goes with it, one verdict per subject (with its valid-response counts
        when the track reports them, its failed blocking gates and its informational gates not
        passed, by their declared names) and every gate result with its configuration (`name`:
        the declared name, `gate`: the per-subject label, `blocking`: false for an informational
        gate).
    """
    verdicts = {
        v.subject: {
            "status": v.status,
            "headline": v.headline,
            "instrument": v.instrument,
            "failed_gates": gate_names(
                [g for g in v.gates if g.status == "failed" and g.spec.blocking], v.gates
            ),
            "informational_not_passed": gate_names(
                [g for g in v.gates if not g.spec.blocking and g.status != "passed"], v.gates
            ),
            "evaluability": None
            if v.evaluability is None
            else {
                **dataclasses.asdict(v.evaluability),
                "valid_rate": v.evaluability.valid_rate,
            },
        }
        for v in result.verdicts
    }
    names = {
        id(g): name
        for subject in dict.fromkeys(g.subject for g in result.gates)
        for g, name in _named([g for g in result.gates if g.subject == subject])
    }
    gates = [
        {
            "subject": g.subject,
            "gate": g.spec.label,
            "name": names[id(g)],
            "metric": g.spec.metric,
            "status": g.status,
            "blocking": g.spec.blocking,
            "compared": g.compared,
            "value": g.value,
            "comparison": g.spec.comparison,
            "threshold": g.spec.threshold,
            "unit": g.spec.unit,
            "figure_estimate": g.figure_estimate,
            "figure_unit": g.figure_unit,
            "reason": g.reason,
        }
        for g in result.gates
    ]
    return {
        "format": "trustbench.report-summary/1",
        "record": str(result.record_path),
        "report": str(result.html_path),
        "complete": result.complete,
        "blocked": result.blocked,
        "exit_code": report_exit_code(result.complete, result.blocked),
        "verdicts": verdicts,
        "gates": gates,
        **getattr(result, "summary", {}),
    }
