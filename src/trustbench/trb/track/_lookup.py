"""Figure lookups shared by the TRB report parts (names, bounds, estimates)."""

from __future__ import annotations

from trustbench.core.figures import Figure

BOOTSTRAP = "cluster_bootstrap_percentile"
"""The interval shown in tables, plots and flat rows (all figures also carry the others)."""


def split_name(split: str, name: str) -> str:
    """Figure name on a split: bare on eval, `transfer.G` on the transfer split."""
    return name if split == "eval" else f"{split}.{name}"


def bootstrap_bounds(figure: Figure | None) -> tuple[float | None, float | None]:
    """The bootstrap interval's (lower, upper), or (None, None) when absent or unmeasured."""
    if figure is None or figure.status != "measured":
        return None, None
    found = next((i for i in figure.intervals if i.method == BOOTSTRAP), None)
    return (None, None) if found is None else (found.lower, found.upper)


def find_figure(figures: list[Figure], name: str) -> Figure | None:
    """The figure called `name`, if any."""
    return next((f for f in figures if f.name == name), None)


def measured_estimate(figures: list[Figure], name: str) -> float | None:
    """The estimate of the figure called `name` when it was measured, else None."""
    figure = find_figure(figures, name)
    return None if figure is None or figure.status != "measured" else figure.estimate
