"""Inline SVG plots for the report, drawn with matplotlib's object API (no pyplot, no GUI).

Figures are built with `matplotlib.figure.Figure` directly, which renders through the Agg/SVG
canvases without touching pyplot's global state, so nothing needs closing and nothing leaks
between reports. Text stays text (`svg.fonttype = none`), is escaped by matplotlib's SVG
writer, and has `$` escaped so a label is never read as mathtext. The XML prolog, DOCTYPE,
metadata and namespace declarations are stripped: the SVG is inlined in HTML5, where they are
not needed, and the page must not reference any external resource.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence

import matplotlib as mpl
import numpy as np
from matplotlib.colors import to_hex
from matplotlib.figure import Figure as PlotFigure
from matplotlib.patches import Patch, Rectangle

_STRIP = [
    re.compile(r"<\?xml[^>]*\?>\s*"),
    re.compile(r"<!DOCTYPE[^>]*>\s*"),
    re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL),
    re.compile(r'\s+xmlns(:\w+)?="[^"]*"'),
]
# Ten distinguishable series colours (after matplotlib's tab10): up to ten series never share one.
_PALETTE = [
    "#3b6ea8",
    "#d08c2f",
    "#5a9e5a",
    "#b5475a",
    "#7c62a8",
    "#5f8f96",
    "#8c6d4f",
    "#d47fb8",
    "#7f7f7f",
    "#b8b83a",
]
# Gate outcome colours: a failed gate never shares the colour of a passed one (red vs green),
# and "not evaluable" / no gate are neither (amber, blue-grey).
_STATUS_COLOUR = {
    "passed": "#2e7d32",
    "failed": "#c62828",
    "not_evaluable": "#b7791f",
    None: "#3b6ea8",
}


def cell_colour(agrees: bool | None, share: float) -> str:
    """A confusion cell's fill: green when desired, red when an error, grey when neither."""
    scale = mpl.colormaps[{True: "Greens", False: "Reds", None: "Greys"}[agrees]]
    return str(to_hex(scale(0.08 + 0.8 * share)))


def wrap(text: str, width: int = 14) -> str:
    """Break a long tick label on `-`, `_`, space or `/` so neighbouring labels never overlap."""
    if len(text) <= width:
        return text
    parts = re.split(r"(?<=[-_ /])", text)
    lines, line = [], ""
    for part in parts:
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    lines.append(line)
    return "\n".join(lines)


def plain(text: str) -> str:
    """Label text safe from mathtext interpretation (`$` escaped)."""
    return text.replace("$", r"\$")


def svg_text(figure: PlotFigure, salt: str) -> str:
    """Render a matplotlib figure to an inline SVG string.

    Args:
        figure: The figure.
        salt: Seed for the SVG's element ids (`svg.hashsalt`): distinct per plot on a page so
            ids never collide, fixed so the same input renders the same bytes.

    Returns:
        The `<svg ...>...</svg>` element.
    """
    buffer = io.StringIO()
    with mpl.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buffer.getvalue()
    for pattern in _STRIP:
        text = pattern.sub("", text)
    # matplotlib names groups "figure_1", "axes_1", ... in every SVG; prefix every id and
    # reference with the salt so several plots on one page never share an id.
    text = re.sub(r'\bid="([^"]+)"', rf'id="{salt}-\1"', text)
    text = re.sub(r'href="#([^"]+)"', rf'href="#{salt}-\1"', text)
    text = re.sub(r"url\(#([^)]+)\)", rf"url(#{salt}-\1)", text)
    return text.strip()


def confusion_legend(kinds: Sequence[Sequence[bool | None]]) -> str:
    """The heatmap's colour key, naming only the colours its cells are drawn in.

    A key that promises green and red over a table drawn all in grey tells a reader the
    opposite of what it shows; so each colour is named only when some cell takes it.
    """
    used = {kind for row in kinds for kind in row}
    names = [(True, "green: desired"), (False, "red: error"), (None, "grey: neither")]
    shown = [text for kind, text in names if kind in used]
    if used == {None}:
        return " (grey: no cell is marked desired or an error)"
    return " (" + "; ".join(shown) + ")"


def confusion_svg(
    rows: Sequence[str],
    columns: Sequence[str],
    counts: Sequence[Sequence[int]],
    *,
    row_title: str,
    column_title: str,
    salt: str,
    kinds: Sequence[Sequence[bool | None]] | None = None,
) -> str:
    """Heatmap of a confusion table with the count written in every cell.

    `kinds[i][j]` says whether a cell is the desired outcome (`True`, shaded green), an error
    (`False`, red) or neither (`None`, grey); by default a cell is desired when its column is its
    row's label. So a bad outcome never shares the colour of a good one. The shade
    is each cell's share of its row, so rows with different totals compare fairly; the count is
    printed so the colour never has to be read as a number.
    """
    table = np.asarray(counts, dtype=float)
    totals = table.sum(axis=1, keepdims=True)
    shares = np.divide(table, totals, out=np.zeros_like(table), where=totals > 0)
    figure = PlotFigure(figsize=(1.4 + 1.0 * len(columns), 1.2 + 0.55 * len(rows)))
    axes = figure.add_subplot()
    kind = kinds or [[row == column for column in columns] for row in rows]
    # Cells are drawn as rectangles (not an embedded raster), so each fill is a plain colour in
    # the SVG. Zero cells keep a faint tint (0.08) so the grid stays visible.
    for (i, j), share in np.ndenumerate(shares):
        axes.add_patch(
            Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=cell_colour(kind[i][j], share))
        )
    axes.set_xlim(-0.5, len(columns) - 0.5)
    axes.set_ylim(len(rows) - 0.5, -0.5)
    for (i, j), value in np.ndenumerate(table):
        colour = "white" if shares[i, j] > 0.6 else "black"
        axes.text(j, i, f"{int(value)}", ha="center", va="center", color=colour, fontsize=9)
    axes.set_xticks(range(len(columns)), [plain(wrap(c, 9)) for c in columns], fontsize=8)
    axes.set_yticks(range(len(rows)), [plain(r) for r in rows], fontsize=8)
    axes.set_xlabel(plain(column_title) + confusion_legend(kind), fontsize=8)
    axes.set_ylabel(plain(row_title), fontsize=9)
    axes.xaxis.set_label_position("top")
    axes.xaxis.tick_top()
    return svg_text(figure, salt)


def forest_svg(
    labels: Sequence[str],
    estimates: Sequence[float | None],
    intervals: Sequence[tuple[float | None, float | None] | None],
    *,
    xlabel: str,
    salt: str,
    reference: float | None = None,
    thresholds: Sequence[float] = (),
    statuses: Sequence[str | None] | None = None,
) -> str:
    """Forest plot: one row per figure, point estimate with its interval.

    A row without an estimate (not run, not applicable) is drawn empty with its label saying
    so; an open interval end is drawn to the axis edge. `thresholds` are drawn as dashed red
    gate lines; `statuses` (a gate status per row, or `None`) colour each row green (passed),
    red (failed) or amber (not evaluable), with the status written after the label.
    """
    count = len(labels)
    figure = PlotFigure(figsize=(6.4, 0.6 + 0.32 * count))
    axes = figure.add_subplot()
    finite = [v for v in estimates if v is not None]
    finite += [e for pair in intervals if pair for e in pair if e is not None]
    finite += list(thresholds)
    statuses = list(statuses) if statuses is not None else [None] * count
    low = min(finite, default=0.0)
    high = max(finite, default=1.0)
    pad = (high - low) * 0.05 or 0.05
    axes.set_xlim(low - pad, high + pad)
    rows = zip(estimates, intervals, statuses, strict=True)
    for row, (estimate, pair, status) in enumerate(rows):
        y = count - 1 - row
        colour = _STATUS_COLOUR.get(status, _STATUS_COLOUR[None])
        if pair is not None:
            left = pair[0] if pair[0] is not None else low - pad
            right = pair[1] if pair[1] is not None else high + pad
            axes.plot([left, right], [y, y], color=colour, linewidth=1.6)
        if estimate is not None:
            axes.plot([estimate], [y], marker="s", color=colour, markersize=5)
    if reference is not None:
        axes.axvline(reference, color="#888888", linewidth=0.8, linestyle="--")
    for threshold in thresholds:
        axes.axvline(threshold, color="#c62828", linewidth=1.0, linestyle="--")
        axes.text(threshold, count - 0.35, f" gate {threshold:g}", color="#c62828", fontsize=7,
                  va="bottom")  # fmt: skip
    named = [
        plain(label) + ("" if status is None else f"  [{status.replace('_', ' ')}]")
        for label, status in zip(labels, statuses, strict=True)
    ]
    axes.set_yticks(range(count), list(reversed(named)), fontsize=8)
    for tick, status in zip(axes.get_yticklabels(), reversed(statuses), strict=True):
        tick.set_color(_STATUS_COLOUR[status] if status else "black")
    axes.set_ylim(-0.7, count + 0.2)
    axes.set_xlabel(plain(xlabel), fontsize=9)
    axes.tick_params(axis="x", labelsize=8)
    axes.grid(axis="x", linewidth=0.3)
    return svg_text(figure, salt)


def grouped_bar_svg(
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[float | None]]],
    errors: Sequence[Sequence[tuple[float, float] | None]] | None,
    *,
    ylabel: str,
    salt: str,
) -> str:
    """Small multiples: one panel per category (e.g. a TRB axis), each on its own scale.

    Axes measured on different scales (a 0-1 rate beside a 0-5 score) are never squashed under
    one shared y axis. Each series keeps one colour in every panel, named in one legend. A
    missing value is not drawn as a zero-height bar; "not run" is written in its place.
    """
    columns = min(3, max(1, len(categories)))
    panels = max(1, math.ceil(len(categories) / columns))
    figure = PlotFigure(figsize=(2.6 * columns + 0.6, 2.2 * panels + 0.6), layout="constrained")
    colours = [_PALETTE[s % len(_PALETTE)] for s in range(len(series))]
    for c, category in enumerate(categories):
        axes = figure.add_subplot(panels, columns, c + 1)
        for s, (name, values) in enumerate(series):
            value = values[c]
            if value is None:
                axes.text(s, 0, "not run", rotation=90, ha="center", va="bottom", fontsize=7)
                continue
            axes.bar(s, value, width=0.75, color=colours[s], label=plain(name))
            pair = errors[s][c] if errors else None
            if pair is not None:
                axes.plot([s, s], list(pair), color="black", linewidth=1.0)
        axes.set_title(plain(wrap(category, 24)), fontsize=8)
        axes.set_xticks([])
        axes.set_xlim(-0.6, len(series) - 0.4)
        axes.axhline(0, color="black", linewidth=0.6)
        axes.tick_params(axis="y", labelsize=7)
        if c % columns == 0:
            axes.set_ylabel(plain(ylabel), fontsize=8)
    handles = [Patch(color=colours[s], label=plain(name)) for s, (name, _) in enumerate(series)]
    if handles:
        figure.legend(handles=handles, fontsize=7, frameon=False, loc="outside lower center",
                      ncols=min(4, len(handles)))  # fmt: skip
    return svg_text(figure, salt)


def radar_svg(
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    salt: str,
) -> str:
    """Radar (polar) profile of complete series; callers leave out series with missing values.

    Radar area depends on axis order, so it must not be read as an aggregate score; the
    report always shows the per-axis table beside it.
    """
    angles = [2 * math.pi * i / len(categories) for i in range(len(categories))]
    figure = PlotFigure(figsize=(4.2, 4.2))
    axes = figure.add_subplot(projection="polar")
    for s, (name, values) in enumerate(series):
        colour = _PALETTE[s % len(_PALETTE)]
        axes.plot([*angles, angles[0]], [*values, values[0]], color=colour, label=plain(name))
        axes.fill([*angles, angles[0]], [*values, values[0]], color=colour, alpha=0.12)
    axes.set_xticks(angles, [plain(c) for c in categories], fontsize=8)
    axes.tick_params(axis="y", labelsize=7)
    if series:
        axes.legend(fontsize=7, frameon=False, loc="upper right", bbox_to_anchor=(1.3, 1.1))
    return svg_text(figure, salt)
