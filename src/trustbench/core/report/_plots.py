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
from matplotlib.figure import Figure as PlotFigure

_STRIP = [
    re.compile(r"<\?xml[^>]*\?>\s*"),
    re.compile(r"<!DOCTYPE[^>]*>\s*"),
    re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL),
    re.compile(r'\s+xmlns(:\w+)?="[^"]*"'),
]
_PALETTE = ["#3b6ea8", "#d08c2f", "#5a9e5a", "#b5475a", "#7c62a8", "#5f8f96", "#8c6d4f"]


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


def confusion_svg(
    rows: Sequence[str],
    columns: Sequence[str],
    counts: Sequence[Sequence[int]],
    *,
    row_title: str,
    column_title: str,
    salt: str,
) -> str:
    """Heatmap of a confusion table with the count written in every cell.

    Colour is each cell's share of its row, so rows with different totals compare fairly;
    the count itself is printed so the colour never has to be read as a number.
    """
    table = np.asarray(counts, dtype=float)
    totals = table.sum(axis=1, keepdims=True)
    shares = np.divide(table, totals, out=np.zeros_like(table), where=totals > 0)
    figure = PlotFigure(figsize=(1.1 + 0.9 * len(columns), 0.9 + 0.55 * len(rows)))
    axes = figure.add_subplot()
    axes.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
    for (i, j), value in np.ndenumerate(table):
        colour = "white" if shares[i, j] > 0.6 else "black"
        axes.text(j, i, f"{int(value)}", ha="center", va="center", color=colour, fontsize=9)
    axes.set_xticks(range(len(columns)), [plain(c) for c in columns], fontsize=8)
    axes.set_yticks(range(len(rows)), [plain(r) for r in rows], fontsize=8)
    axes.set_xlabel(plain(column_title), fontsize=9)
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
) -> str:
    """Forest plot: one row per figure, point estimate with its interval.

    A row without an estimate (not run, not applicable) is drawn empty with its label saying
    so; an open interval end is drawn to the axis edge with an arrow.
    """
    count = len(labels)
    figure = PlotFigure(figsize=(6.4, 0.6 + 0.32 * count))
    axes = figure.add_subplot()
    finite = [v for v in estimates if v is not None]
    finite += [e for pair in intervals if pair for e in pair if e is not None]
    low = min(finite, default=0.0)
    high = max(finite, default=1.0)
    pad = (high - low) * 0.05 or 0.05
    axes.set_xlim(low - pad, high + pad)
    for row, (estimate, pair) in enumerate(zip(estimates, intervals, strict=True)):
        y = count - 1 - row
        if pair is not None:
            left = pair[0] if pair[0] is not None else low - pad
            right = pair[1] if pair[1] is not None else high + pad
            axes.plot([left, right], [y, y], color="#3b6ea8", linewidth=1.6)
        if estimate is not None:
            axes.plot([estimate], [y], marker="s", color="#1d3f66", markersize=5)
    if reference is not None:
        axes.axvline(reference, color="#888888", linewidth=0.8, linestyle="--")
    axes.set_yticks(range(count), [plain(label) for label in reversed(labels)], fontsize=8)
    axes.set_ylim(-0.7, count - 0.3)
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
    """Grouped bars: one group per category (e.g. a TRB track), one bar per series.

    A missing value is not drawn as a zero-height bar; "not run" is written in its place.
    """
    figure = PlotFigure(figsize=(max(4.8, 1.2 * len(categories) + 2.0), 3.2))
    axes = figure.add_subplot()
    width = 0.8 / max(1, len(series))
    for s, (name, values) in enumerate(series):
        for c, value in enumerate(values):
            x = c - 0.4 + width * (s + 0.5)
            if value is None:
                axes.text(x, 0, "not run", rotation=90, ha="center", va="bottom", fontsize=7)
                continue
            axes.bar(
                x,
                value,
                width=width * 0.92,
                color=_PALETTE[s % len(_PALETTE)],
                label=plain(name) if c == 0 or values[0] is None else None,
            )
            pair = errors[s][c] if errors else None
            if pair is not None:
                axes.plot([x, x], list(pair), color="black", linewidth=1.0)
    handles, names = axes.get_legend_handles_labels()
    unique = dict(zip(names, handles, strict=True))
    if unique:
        axes.legend(unique.values(), unique.keys(), fontsize=7, frameon=False)
    axes.set_xticks(range(len(categories)), [plain(c) for c in categories], fontsize=8)
    axes.set_ylabel(plain(ylabel), fontsize=9)
    axes.axhline(0, color="black", linewidth=0.6)
    axes.tick_params(axis="y", labelsize=8)
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
