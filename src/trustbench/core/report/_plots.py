"""Inline SVG plots for the report: the review plots written directly, the rest with matplotlib.

The confusion heatmap and the forest plot, which every RTB report draws, are written here as
plain SVG (rectangles, lines and text; text escaped, so a label is never markup). Drawing them
with matplotlib cost about 2 s of CPU per report (its import 1.3 s, six plots 0.7 s), about 40% of
`trustbench report`'s CPU on a 2,000-trial reviewer run (`python -m bench.report_speed`, issue
55). The TRB profile's small multiples and radar are still matplotlib figures, built with
`matplotlib.figure.Figure` directly (no pyplot, no global state, nothing to close) and imported
only when one is drawn. There, text stays text (`svg.fonttype = none`), is escaped by
matplotlib's SVG writer, and has `$` escaped so a label is never read as mathtext; the XML prolog,
DOCTYPE, metadata and namespace declarations are stripped: the SVG is inlined in HTML5, where they
are not needed, and the page must not reference any external resource.
"""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.figure import Figure as PlotFigure

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


# ColorBrewer's nine-class sequential palettes, the anchors of matplotlib's "Greens", "Reds" and
# "Greys" colour maps, so a cell keeps the colour it had when matplotlib drew it.
_SEQUENTIAL = {
    True: "f7fcf5 e5f5e0 c7e9c0 a1d99b 74c476 41ab5d 238b45 006d2c 00441b",
    False: "fff5f0 fee0d2 fcbba1 fc9272 fb6a4a ef3b2c cb181d a50f15 67000d",
    None: "ffffff f0f0f0 d9d9d9 bdbdbd 969696 737373 525252 252525 000000",
}
_LEVELS = 256
"""Entries of matplotlib's colour-map lookup table: a value picks entry floor(value * 256)."""


def cell_colour(agrees: bool | None, share: float) -> str:
    """A confusion cell's fill: green when desired, red when an error, grey when neither.

    The shade is `0.08 + 0.8 * share` on the palette, read as matplotlib's colour map reads it:
    the lookup-table entry floor(value * 256), linearly interpolated between the nine anchors.
    """
    anchors = [bytes.fromhex(colour) for colour in _SEQUENTIAL[agrees].split()]
    entry = min(int((0.08 + 0.8 * share) * _LEVELS), _LEVELS - 1)
    position = entry / (_LEVELS - 1) * (len(anchors) - 1)
    below = min(int(position), len(anchors) - 2)
    weight = position - below
    channels = (
        (anchors[below][c] / 255) * (1 - weight) + (anchors[below + 1][c] / 255) * weight
        for c in range(3)
    )
    return "#" + "".join(f"{round(value * 255):02x}" for value in channels)


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
    import matplotlib as mpl

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


_FONT = "font-family: 'DejaVu Sans', 'Bitstream Vera Sans', Arial, sans-serif"
"""matplotlib's default face first, so the plots read as they did when it drew them."""


def _width(text: str, size: float) -> float:
    """An estimate of a one-line label's width in px (0.62 em a character), for margins."""
    return 0.62 * size * max((len(line) for line in text.split("\n")), default=0)


def _text(
    x: float,
    y: float,
    text: str,
    *,
    size: float,
    anchor: str = "start",
    colour: str = "black",
    rotate: bool = False,
) -> str:
    """A `<text>` element, its lines as `<tspan>`s centred on `y`; `rotate` turns it upright."""
    lines = text.split("\n")
    turn = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
    first = -(len(lines) - 1) * 0.55
    spans = "".join(
        f'<tspan x="{x:.1f}" dy="{first if i == 0 else 1.1:.2f}em">{html.escape(line)}</tspan>'
        for i, line in enumerate(lines)
    )
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size:g}" text-anchor="{anchor}" '
        f'dominant-baseline="central" fill="{colour}"{turn}>{spans}</text>'
    )


def _line(x1: float, y1: float, x2: float, y2: float, colour: str, width: float, *,
          dashed: bool = False) -> str:  # fmt: skip
    dash = ' stroke-dasharray="4 3"' if dashed else ""
    return (f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}" '
            f'stroke-width="{width:g}"{dash}/>')  # fmt: skip


def _svg(salt: str, width: float, height: float, parts: Sequence[str]) -> str:
    return (
        f'<svg id="{salt}" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" style="{_FONT}">'
        + "".join(parts)
        + "</svg>"
    )


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
    printed so the colour never has to be read as a number. Each cell is a `rect` of class
    `cell`, row by row.
    """
    kind = kinds or [[row == column for column in columns] for row in rows]
    cell_width, cell_height = 64.0, 30.0
    column_labels = [wrap(c, 9) for c in columns]
    label_lines = max((label.count("\n") + 1 for label in column_labels), default=1)
    title = column_title + confusion_legend(kind)
    left = 28 + max((_width(r, 11) for r in rows), default=0.0) + 8
    top = 22 + 13 * label_lines + 6
    grid_width = cell_width * len(columns)
    width = max(left + grid_width + 10, _width(title, 11) + 20)
    height = top + cell_height * len(rows) + 10
    parts = [
        _text(left + grid_width / 2, 10, title, size=11, anchor="middle"),
        _text(10, top + cell_height * len(rows) / 2, row_title, size=12, anchor="middle",
              rotate=True),
    ]  # fmt: skip
    for j, label in enumerate(column_labels):
        lines = label.count("\n") + 1
        y = top - 8 - 13 * (lines - 1) / 2
        parts.append(_text(left + (j + 0.5) * cell_width, y, label, size=11, anchor="middle"))
    for i, (row, row_counts) in enumerate(zip(rows, counts, strict=True)):
        y = top + i * cell_height
        parts.append(_text(left - 6, y + cell_height / 2, row, size=11, anchor="end"))
        total = sum(row_counts)
        for j, count in enumerate(row_counts):
            share = count / total if total > 0 else 0.0
            x = left + j * cell_width
            parts.append(
                f'<rect class="cell" x="{x:.1f}" y="{y:.1f}" width="{cell_width:g}" '
                f'height="{cell_height:g}" fill="{cell_colour(kind[i][j], share)}" '
                'stroke="#ffffff"/>'
            )
            colour = "white" if share > 0.6 else "black"
            parts.append(_text(x + cell_width / 2, y + cell_height / 2, f"{int(count)}", size=12,
                               anchor="middle", colour=colour))  # fmt: skip
    return _svg(salt, width, height, parts)


def _ticks(low: float, high: float, target: int = 5) -> list[float]:
    """About `target` round tick positions (steps of 1, 2, 2.5 or 5 times a power of 10)."""
    raw = (high - low) / target
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    return [round(first + i * step, 12) for i in range(int((high - first) / step + 1e-9) + 1)]


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
    finite = [v for v in estimates if v is not None]
    finite += [e for pair in intervals if pair for e in pair if e is not None]
    finite += list(thresholds)
    statuses = list(statuses) if statuses is not None else [None] * count
    low, high = min(finite, default=0.0), max(finite, default=1.0)
    pad = (high - low) * 0.05 or 0.05
    start, end = low - pad, high + pad
    named = [
        label + ("" if status is None else f"  [{status.replace('_', ' ')}]")
        for label, status in zip(labels, statuses, strict=True)
    ]
    left = min(max((_width(n, 11) for n in named), default=0.0), 380.0) + 16
    plot_width = max(260.0, 660 - left)
    top, row_height = 24.0, 22.0
    plot_height = row_height * count + 8
    width, height = left + plot_width + 16, top + plot_height + 46

    def at(value: float) -> float:
        return left + (value - start) / (end - start) * plot_width

    bottom = top + plot_height
    parts: list[str] = []
    for tick in _ticks(start, end):
        x = at(tick)
        parts.append(_line(x, top, x, bottom, "#b0b0b0", 0.4))
        parts.append(_text(x, bottom + 12, f"{tick:g}", size=11, anchor="middle"))
    parts.append(f'<rect x="{left:.1f}" y="{top:.1f}" width="{plot_width:.1f}" '
                 f'height="{plot_height:.1f}" fill="none" stroke="#000000"/>')  # fmt: skip
    parts.append(_text(left + plot_width / 2, bottom + 32, xlabel, size=12, anchor="middle"))
    vertical = [(reference, "#888888", 0.8)] if reference is not None else []
    vertical += [(threshold, "#c62828", 1.0) for threshold in thresholds]
    for value, colour, stroke in vertical:
        parts.append(_line(at(value), top, at(value), bottom, colour, stroke, dashed=True))
    for threshold in thresholds:
        parts.append(_text(at(threshold), top - 9, f" gate {threshold:g}", size=10,
                           colour="#c62828"))  # fmt: skip
    rows = zip(named, estimates, intervals, statuses, strict=True)
    for row, (name, estimate, pair, status) in enumerate(rows):
        y = top + 4 + (row + 0.5) * row_height
        colour = _STATUS_COLOUR.get(status, _STATUS_COLOUR[None])
        parts.append(_text(left - 6, y, name, size=11, anchor="end",
                           colour=_STATUS_COLOUR[status] if status else "black"))  # fmt: skip
        if pair is not None:
            x1 = at(pair[0] if pair[0] is not None else start)
            x2 = at(pair[1] if pair[1] is not None else end)
            parts.append(_line(x1, y, x2, y, colour, 1.6))
        if estimate is not None:
            parts.append(f'<rect x="{at(estimate) - 3.5:.1f}" y="{y - 3.5:.1f}" width="7" '
                         f'height="7" fill="{colour}"/>')  # fmt: skip
    return _svg(salt, width, height, parts)


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
    from matplotlib.figure import Figure as PlotFigure
    from matplotlib.patches import Patch

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
    from matplotlib.figure import Figure as PlotFigure

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
