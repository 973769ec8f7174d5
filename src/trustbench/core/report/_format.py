"""Text formatting of figures and intervals for the report (also usable in CLI output)."""

from __future__ import annotations

from trustbench.core.figures import Figure, FigureKind, Interval

_METHOD_NAMES = {
    "clopper_pearson": "Clopper-Pearson exact",
    "wilson": "Wilson score",
    "cluster_robust_t": "cluster-robust t",
    "cluster_bootstrap_percentile": "cluster bootstrap (percentile)",
    "sign_flip_exact": "sign-flip exact",
    "sign_flip_monte_carlo": "sign-flip Monte Carlo",
    "kappa_asymptotic_normal": "asymptotic normal",
}


def format_value(value: float | None, kind: FigureKind) -> str:
    """A rate as a percentage with two decimals, anything else to four significant digits."""
    if value is None:
        return "n/a"
    if kind == "rate":
        return f"{value * 100:.2f}%"
    return f"{value:.4g}"


def format_interval(interval: Interval, kind: FigureKind) -> str:
    """One line: level, sidedness, method, bounds, and seed/resamples/clusters where relevant."""
    level = f"{interval.confidence * 100:g}%"
    method = _METHOD_NAMES.get(interval.method, interval.method)
    if interval.not_computable:
        return f"{level} {method}: not computable ({interval.not_computable})"
    if interval.sidedness == "upper":
        bounds = f"upper bound {format_value(interval.upper, kind)}"
        if interval.upper is None:
            bounds = "upper bound unbounded"
    elif interval.sidedness == "lower":
        bounds = f"lower bound {format_value(interval.lower, kind)}"
        if interval.lower is None:
            bounds = "lower bound unbounded"
    else:
        low = "-inf" if interval.lower is None else format_value(interval.lower, kind)
        high = "+inf" if interval.upper is None else format_value(interval.upper, kind)
        bounds = f"[{low}, {high}]"
    extras = []
    if interval.groups is not None:
        extras.append(f"G={interval.groups}")
    if interval.seed is not None:
        extras.append(f"seed {interval.seed}")
    if interval.resamples is not None:
        extras.append(f"{interval.resamples:,} resamples")
    tail = f" ({', '.join(extras)})" if extras else ""
    note = f"; {interval.note}" if interval.note else ""
    return f"{level} {method}: {bounds}{tail}{note}"


def format_estimate(figure: Figure) -> str:
    """The estimate cell: the value, "not run", "n/a" or "not evaluable"."""
    if figure.status == "not_run":
        return "not run"
    if figure.status == "not_applicable":
        return "n/a"
    if figure.status == "not_evaluable":
        return "not evaluable"
    return format_value(figure.estimate, figure.kind)


def format_counts(figure: Figure) -> str:
    """The numerator/denominator cell, e.g. "3 / 20"; empty when not run."""
    if figure.status == "not_run" or figure.denominator is None:
        return ""

    def number(value: float | int | None) -> str:
        if value is None:
            return "?"
        return f"{value:g}" if isinstance(value, float) else f"{value:,}"

    return f"{number(figure.numerator)} / {number(figure.denominator)}"
