"""Building blocks a track composes into its report page.

Each block is data (a pydantic model); `render_report_html` turns a `ReportPage` into one
self-contained HTML page. Release gates are not a block: the page always shows them first,
failed gates at the top, so no strong average can be read before a failed gate.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from trustbench.core._analysis import Evaluability
from trustbench.core.figures import Figure, Sidedness
from trustbench.core.gates import GateResult


class _Block(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)


class _Section(_Block):
    folded: bool = False
    """Show the block folded (an HTML `<details>` element the reader opens), so per-configuration
    detail does not push the summary off the page; its content is in the HTML either way."""
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
