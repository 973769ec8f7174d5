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
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from trustbench._docstrings import documented
from trustbench.core._analysis import VALID_RESPONSE_RATE, Evaluability
from trustbench.core.figures import Figure, Sidedness
from trustbench.core.gates import GateResult
from trustbench.core.report._system import SystemUnderTest

# ------------------------------------------------------------------------------------------------
# Building blocks a track composes into its report page.
#
# Each block is data (a pydantic model); `render_report_html` turns a `ReportPage` into one
# self-contained HTML page. Release gates are not a block: the page always shows them first,
# failed gates at the top, so no strong average can be read before a failed gate.


class _Block(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class _Section(_Block):
    folded: bool = False
    """Show the block folded (an HTML `<details>` element the reader opens), so per-configuration
    detail does not push the summary off the page; its content is in the HTML either way. Every
    block that is not `lead` is shown folded below the verdicts (the first screen is the answer);
    `folded` tells a track's own ordering which blocks are per-configuration detail."""
    lead: bool = False
    """Show the block open right under the verdict banner, before the system under test: only
    for a track's own verdict table (TRB's verdict per adapter), never for detail."""
    subject: str | None = None
    """The one gated subject whose trials this block shows, if it shows one only (per-
    configuration detail). When that subject is not evaluable the report withholds the
    estimates of a figures or forest block (its figures become `not_evaluable`), like the
    subject's headline figures; text blocks and tables are the track's to build withheld."""


class FiguresBlock(_Section):
    """A table of figures: estimate, numerator/denominator, unit, intervals, denominator text."""

    kind: Literal["figures"] = "figures"
    """Block type tag (`figures`), used to read a page back from JSON."""
    title: str
    """Section heading."""
    figures: list[Figure]
    """Figures in display order; unrun ones show "not run", undefined ones "n/a"."""
    note: str = ""
    """Text shown under the heading (what the table covers, how to read it)."""


class ConfusionBlock(_Section):
    """A confusion table: rows reference, columns observed (including missing and invalid)."""

    kind: Literal["confusion"] = "confusion"
    """Block type tag (`confusion`), used to read a page back from JSON."""
    title: str
    """Section heading."""
    rows: list[str]
    """Row labels, e.g. the reference decisions permit / deny / hold."""
    columns: list[str]
    """Column labels, e.g. permit / deny / hold / missing / invalid."""
    counts: list[list[int]]
    """counts[i][j]: cases (or trials) with reference rows[i] and observed columns[j]."""
    row_title: str = "reference"
    """Axis title of the rows."""
    column_title: str = "observed"
    """Axis title of the columns."""
    note: str = ""
    """Text shown under the heading (the unit counted, e.g. trials)."""
    good: list[list[bool | None]] | None = None
    """Per cell: `True` the desired outcome (shaded green), `False` an error (red), `None`
    neither (grey, e.g. unresolved). Default: a cell is desired when its column is its row's
    label and an error otherwise; all grey when no row label is a column."""

    @model_validator(mode="after")
    def _shape(self) -> ConfusionBlock:
        if not self.rows or not self.columns:
            raise ValueError(f"confusion block {self.title!r}: needs rows and columns")
        if len(self.counts) != len(self.rows) or any(
            len(row) != len(self.columns) for row in self.counts
        ):
            raise ValueError(f"confusion block {self.title!r}: counts shape != rows x columns")
        if self.good is not None and [len(r) for r in self.good] != [len(r) for r in self.counts]:
            raise ValueError(f"confusion block {self.title!r}: good shape != rows x columns")
        return self

    def cell_kinds(self) -> list[list[bool | None]]:
        """`good`, or its default (see the field)."""
        if self.good is not None:
            return self.good
        if not set(self.rows) & set(self.columns):
            return [[None] * len(self.columns) for _ in self.rows]
        return [[row == column for column in self.columns] for row in self.rows]


class TableBlock(_Section):
    """A plain table of text cells (breakdowns, case drill-downs), optionally filterable.

    The filter is a few lines of inline script that hide rows not containing the typed text;
    with scripts off the whole table is still there.
    """

    kind: Literal["table"] = "table"
    """Block type tag (`table`), used to read a page back from JSON."""
    title: str
    """Section heading."""
    columns: list[str]
    """Column headings."""
    rows: list[list[str]]
    """Cells, one list per row, already formatted as text (escaped when rendered)."""
    filterable: bool = False
    """Show a text box that filters rows (client-side, no external assets)."""
    scroll: bool = False
    """Cap the table's height and scroll inside it (long drill-downs)."""
    note: str = ""
    """Text shown under the heading."""

    @model_validator(mode="after")
    def _widths(self) -> TableBlock:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(
                    f"table {self.title!r}: a row has {len(row)} cells, not {len(self.columns)}"
                )
        return self


class ForestBlock(_Section):
    """Forest plot of many figures with one declared interval each, plus a table."""

    kind: Literal["forest"] = "forest"
    """Block type tag (`forest`), used to read a page back from JSON."""
    title: str
    """Section heading."""
    figures: list[Figure]
    """Figures, one row each (not-run rows stay, drawn empty)."""
    interval_method: str = "clopper_pearson"
    """Which interval to draw for each figure."""
    confidence: float = 0.95
    """Its confidence level."""
    sidedness: Sidedness = "two_sided"
    """Its sidedness."""
    xlabel: str = "estimate"
    """Axis label."""
    reference: float | None = None
    """Optional vertical reference line (e.g. 0 for differences)."""
    metric: str | None = None
    """The figure name gates read when the rows are configurations (each row named for its
    subject, or `"<subject>: <metric>"` when one plot holds several metrics): the page then
    draws the gate thresholds and colours each row passed / failed."""
    note: str = ""
    """Text shown under the heading."""


class ProfileBlock(_Section):
    """A per-axis profile (e.g. TRB's vector): grouped bars, optionally a radar beside it.

    The profile is shown per axis, never collapsed to one number.
    """

    kind: Literal["profile"] = "profile"
    """Block type tag (`profile`), used to read a page back from JSON."""
    title: str
    """Section heading."""
    axes: list[str]
    """Axis names, e.g. the six TRB tracks."""
    series: dict[str, list[float | None]]
    """Series name (e.g. a baseline) -> value per axis; `None` where not run."""
    errors: dict[str, list[tuple[float, float] | None]] | None = None
    """Optional (lower, upper) per series and axis, drawn as error bars."""
    ylabel: str = "score"
    """Value axis label."""
    radar: bool = False
    """Also draw a radar of the series that have every axis measured (needs >= 3 axes)."""
    note: str = ""
    """Text shown under the heading."""

    @model_validator(mode="after")
    def _lengths(self) -> ProfileBlock:
        for name, values in self.series.items():
            if len(values) != len(self.axes):
                raise ValueError(f"profile {self.title!r}: series {name!r} length != axes")
        return self


class TextBlock(_Section):
    """Free text paragraphs (e.g. what a track measured and what it cannot establish)."""

    kind: Literal["text"] = "text"
    """Block type tag (`text`), used to read a page back from JSON."""
    title: str
    """Section heading."""
    paragraphs: list[str]
    """Paragraphs, shown as plain text."""


Block = Annotated[
    FiguresBlock | ConfusionBlock | ForestBlock | ProfileBlock | TextBlock | TableBlock,
    Field(discriminator="kind"),
]
"""Any report block."""


class ReportPage(_Block):
    """Everything one report page shows: verdicts, gates, sections, manifest, caveats."""

    title: str
    """Page title, e.g. "RTB reviewer track: run 2026-11-29"."""
    subtitle: str = ""
    """One line under the title (what was tested)."""
    gates: list[GateResult] = Field(default_factory=list)
    """Release-gate results; always shown first, failed gates at the top."""
    sections: list[Block] = Field(default_factory=list)
    """Blocks in display order."""
    manifest: dict[str, str] = Field(default_factory=dict)
    """Manifest summary: label -> value (hash, corpus version, candidates, seeds...)."""
    qualifications: list[str] = Field(default_factory=list)
    """What these results do not establish (shown as a list at the end)."""
    subjects: list[str] = Field(default_factory=list)
    """Gated subjects (candidates and instruments) in display order; subjects only named by a
    gate result are added after them."""
    instruments: list[str] = Field(default_factory=list)
    """Subjects that are measurement instruments, shown apart from candidates."""
    expected_to_fail: list[str] = Field(default_factory=list)
    """The instruments built to fail a gate; one passing every gate is a harness problem."""
    not_run: list[str] = Field(default_factory=list)
    """Subjects none of whose trials ran: their verdict is "not run", never a pass."""
    evaluability: dict[str, Evaluability] = Field(default_factory=dict)
    """Subject -> valid-response counts, shown beside its verdict when the track reports them."""
    verdict_note: str = ""
    """Heads every verdict line when set (`TrackAnalysis.verdict_note`, e.g. a retired set)."""
    incomplete: str | None = None
    """Why the run is incomplete ("50 of 720 planned trials ran"), or None for a complete run.
    Set, every candidate's verdict is "incomplete", no gate counts as passed and `report` exits
    with `INCOMPLETE_EXIT`."""
    system_under_test: SystemUnderTest | None = None
    """What was tested (type, model ids, settings, declarations), shown under the verdicts; a
    configuration whose server reported another model id is flagged in its verdict line."""


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

    model_config = documented(extra="forbid", frozen=True)

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
        mismatch = page.system_under_test and page.system_under_test.mismatch_note(subject)
        if mismatch:
            headline = f"{mismatch}; {headline}"
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
