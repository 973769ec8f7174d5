"""Tables a track builds from figures it already computed (presentation only)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trustbench.core.figures import Figure
from trustbench.core.report._blocks import TableBlock
from trustbench.core.report._format import format_counts, format_estimate


def _cell(figure: Figure) -> str:
    counts = format_counts(figure)
    return f"{format_estimate(figure)} ({counts})" if counts else format_estimate(figure)


def breakdown_table(
    title: str, by: str, figures: Mapping[str, Sequence[Figure]], *, note: str = ""
) -> TableBlock:
    """A per-group / per-variant table: one row per value, one column per figure name.

    Each cell is the estimate with its numerator / denominator ("not run" and "n/a" as such);
    a figure missing for one value reads "not computed". The table is folded: it is detail.

    Args:
        title: Section heading.
        by: What the rows are (e.g. `group`, `variant`), the first column's heading.
        figures: Row value -> its figures.
        note: Text under the heading (where the intervals are, what one row holds).

    Returns:
        A folded `TableBlock`.
    """
    names = list(dict.fromkeys(f.name for figs in figures.values() for f in figs))
    rows = []
    for value, figs in figures.items():
        cells = {f.name: f for f in figs}
        rows.append(
            [
                value,
                *[_cell(cells[n]) if n in cells else "not computed" for n in names],
            ]
        )
    return TableBlock(title=title, columns=[by, *names], rows=rows, folded=True, note=note)
