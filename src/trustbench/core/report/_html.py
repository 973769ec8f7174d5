"""Render a `ReportPage` to one self-contained HTML page (inline CSS and SVG, no scripts).

The template is package data (`templates/report.html.j2`) rendered with autoescaping on, so
every string from a record (case ids, model names, reasons) is escaped; only the SVG produced
by `_plots` is inserted as markup.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from trustbench.core.figures import Figure
from trustbench.core.gates import GateResult
from trustbench.core.report import _plots
from trustbench.core.report._blocks import (
    Block,
    ConfusionBlock,
    FiguresBlock,
    ForestBlock,
    ProfileBlock,
    ReportPage,
    TextBlock,
)
from trustbench.core.report._format import (
    format_counts,
    format_estimate,
    format_interval,
    format_value,
)

_GATE_ORDER = {"failed": 0, "not_evaluable": 1, "passed": 2}


@lru_cache(maxsize=1)
def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("trustbench.core.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.filters.update(
        estimate=format_estimate,
        counts=format_counts,
        interval=format_interval,
        value=format_value,
    )
    return environment


def _figure_row(figure: Figure) -> dict[str, Any]:
    return {
        "figure": figure,
        "estimate": format_estimate(figure),
        "counts": format_counts(figure),
        "intervals": [format_interval(i, figure.kind) for i in figure.intervals],
    }


def _forest(block: ForestBlock, salt: str) -> dict[str, Any]:
    labels, estimates, pairs, rows = [], [], [], []
    for figure in block.figures:
        interval = figure.interval(block.interval_method, block.confidence, block.sidedness)
        usable = interval is not None and not interval.not_computable
        suffix = {"not_run": " (not run)", "not_applicable": " (n/a)"}.get(figure.status, "")
        labels.append(figure.name + suffix)
        estimates.append(figure.estimate)
        pairs.append((interval.lower, interval.upper) if usable and interval else None)
        rows.append(_figure_row(figure))
    svg = _plots.forest_svg(
        labels, estimates, pairs, xlabel=block.xlabel, salt=salt, reference=block.reference
    )
    return {"block": block, "svg": Markup(svg), "rows": rows}


def _profile(block: ProfileBlock, salt: str) -> dict[str, Any]:
    names = list(block.series)
    errors = [block.errors.get(n) for n in names] if block.errors else None
    bars = _plots.grouped_bar_svg(
        block.axes,
        [(n, block.series[n]) for n in names],
        [e or [None] * len(block.axes) for e in errors] if errors else None,
        ylabel=block.ylabel,
        salt=salt,
    )
    complete = [(n, v) for n, v in block.series.items() if all(x is not None for x in v)]
    skipped = [n for n in names if n not in dict(complete)]
    radar = None
    if block.radar and len(block.axes) >= 3 and complete:
        radar = Markup(_plots.radar_svg(block.axes, complete, salt=f"{salt}r"))  # type: ignore[arg-type]
    return {
        "block": block,
        "svg": Markup(bars),
        "radar": radar,
        "radar_skipped": skipped if block.radar else [],
    }


def _section(block: Block, index: int) -> dict[str, Any]:
    salt = f"tb{index}"
    if isinstance(block, FiguresBlock):
        return {"block": block, "rows": [_figure_row(f) for f in block.figures]}
    if isinstance(block, ConfusionBlock):
        svg = _plots.confusion_svg(
            block.rows,
            block.columns,
            block.counts,
            row_title=block.row_title,
            column_title=block.column_title,
            salt=salt,
        )
        totals = [sum(row) for row in block.counts]
        return {"block": block, "svg": Markup(svg), "totals": totals}
    if isinstance(block, ForestBlock):
        return _forest(block, salt)
    if isinstance(block, ProfileBlock):
        return _profile(block, salt)
    if isinstance(block, TextBlock):
        return {"block": block}
    raise TypeError(f"unknown block {type(block).__name__}")


def sorted_gates(gates: list[GateResult]) -> list[GateResult]:
    """Failed gates first, then not evaluable, then passed; declaration order within each."""
    return sorted(gates, key=lambda result: _GATE_ORDER[result.status])


def render_report_html(page: ReportPage) -> str:
    """Render the page to HTML text.

    Args:
        page: What to show.

    Returns:
        A complete HTML5 document with no external resources and no scripts.
    """
    template = _environment().get_template("report.html.j2")
    gates = sorted_gates(page.gates)
    counts = {s: sum(1 for g in gates if g.status == s) for s in _GATE_ORDER}
    return template.render(
        page=page,
        gates=gates,
        gate_counts=counts,
        sections=[_section(block, i) for i, block in enumerate(page.sections)],
    )


def write_report_html(path: Path | str, page: ReportPage) -> Path:
    """Render the page and write it as UTF-8 (e.g. `RUN_DIR/report.html`)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_report_html(page), encoding="utf-8")
    return target
