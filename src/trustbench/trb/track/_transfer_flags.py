"""Track 6 flags in the TRB report: transfer drops judged against the governed oracle's drop."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench.core.figures import Figure
from trustbench.trb.profile._vector import HIGH_LEVEL, TRANSFER_DROP
from trustbench.trb.track._lookup import (
    bootstrap_bounds,
    find_figure,
    measured_estimate,
    split_name,
)

if TYPE_CHECKING:
    from trustbench.trb.track._measures import TrbMeasure


def g_below_eval(candidate: str, figures: list[Figure], oracle: list[Figure]) -> list[str]:
    """Transfer contexts where G's interval lies wholly below its eval interval.

    Only for a high in-distribution G (at or above `HIGH_LEVEL["governance"]`, which is what
    the flag claims), and only when the drop exceeds the governed oracle's own drop on that
    context by more than `TRANSFER_DROP["governance"]`: with several small transfer contexts,
    a low-G adapter (the uniform oracle) has some context whose G interval misses its eval
    interval by chance, and a context can be harder for every adapter.
    """
    g = measured_estimate(figures, "G")
    eval_low, _ = bootstrap_bounds(find_figure(figures, "G"))
    if g is None or eval_low is None or g < HIGH_LEVEL["governance"]:
        return []
    oracle_g = measured_estimate(oracle, "G")
    out = []
    for context in sorted({f.name.split(".", 1)[0] for f in figures if f.name.endswith(".G")}):
        there = measured_estimate(figures, split_name(context, "G"))
        _, transfer_high = bootstrap_bounds(find_figure(figures, split_name(context, "G")))
        if there is None or transfer_high is None or transfer_high >= eval_low:
            continue
        oracle_there = measured_estimate(oracle, split_name(context, "G"))
        oracle_drop = 0.0 if oracle_g is None or oracle_there is None else oracle_g - oracle_there
        if (g - there) - oracle_drop > TRANSFER_DROP["governance"]:
            out.append(
                f"{candidate}: G on transfer context {context!r} is below G on eval (intervals "
                "do not overlap, drop beyond the governed oracle's): a high in-distribution "
                "level that does not transfer (spec §5)"
            )
    return out


def excess_drop(
    figures: list[Figure], oracle: list[Figure], headline: str
) -> tuple[str, float, float | None] | None:
    """(context, drop, oracle's drop) on the context where the drop most exceeds the oracle's.

    A transfer context can be harder for everyone (stronger wind lowers every model's reach
    lift), so an adapter's drop is judged against the governed oracle's drop on the same
    context: drop(context) = eval level - level on that context, for the adapter and for the
    oracle; the excess is their difference. When the oracle has no measured level on that
    context, its drop is None and the adapter's drop is judged alone (never silently passed).
    """
    home, oracle_home = measured_estimate(figures, headline), measured_estimate(oracle, headline)
    if home is None:
        return None
    contexts = sorted({f.name.split(".", 1)[0] for f in figures if f.name.endswith(f".{headline}")})
    worst: tuple[str, float, float | None] | None = None
    for context in contexts:
        there = measured_estimate(figures, f"{context}.{headline}")
        if there is None:
            continue
        oracle_there = measured_estimate(oracle, f"{context}.{headline}")
        oracle_drop = (
            None if oracle_home is None or oracle_there is None else oracle_home - oracle_there
        )
        entry = (context, home - there, oracle_drop)
        if worst is None or entry[1] - (entry[2] or 0.0) > worst[1] - (worst[2] or 0.0):
            worst = entry
    return worst


NOISE_DROP = "its interval reaches the margin, so it is not a collapse beyond sampling noise"
"""Said of a flagged transfer drop whose interval does not clear the margin: it informs, and
does not by itself make the adapter "not trustworthy" (`trb/track/_trust.py`)."""


def drop_interval(
    figures: list[Figure], headline: str, context: str
) -> tuple[float | None, float | None]:
    """The drop eval - context as [eval lower - context upper, eval upper - context lower].

    The two levels come from disjoint traces, so each has its own trace-clustered bootstrap
    interval; combining the ends this way covers the difference at least as often as the two
    intervals jointly cover their levels (>= 90% for two 95% intervals): conservative, and
    declared so, since no joint resampling of the two splits is run.
    """
    eval_low, eval_high = bootstrap_bounds(find_figure(figures, headline))
    there_low, there_high = bootstrap_bounds(find_figure(figures, split_name(context, headline)))
    if None in (eval_low, eval_high, there_low, there_high):
        return None, None
    return eval_low - there_high, eval_high - there_low  # type: ignore[operator]


def transfer_drop_flags(
    candidate: str,
    figures: list[Figure],
    oracle: str | None,
    oracle_figures: list[Figure],
    measures: list[TrbMeasure],
) -> list[str]:
    """High in-distribution levels that drop on a transfer context by more than the oracle's.

    One flag per measure whose headline is at or above its `HIGH_LEVEL` and whose worst
    transfer drop exceeds the governed oracle's own drop there by more than `TRANSFER_DROP`.
    """
    flags: list[str] = []
    for measure in measures:
        high_level = HIGH_LEVEL.get(measure.key)
        level = measured_estimate(figures, measure.headline)
        if high_level is None or level is None or level < high_level:
            continue
        worst = excess_drop(figures, oracle_figures, measure.headline)
        if worst is None:
            continue
        context, drop, oracle_drop = worst
        margin = TRANSFER_DROP[measure.key]
        if drop - (oracle_drop or 0.0) > margin:
            versus = (
                f"{oracle}'s own drop there is {oracle_drop:.3f}"
                if oracle_drop is not None
                else "no governed-oracle drop was measured there, so the drop is judged alone"
            )
            low, high = drop_interval(figures, measure.headline, context)
            beyond = low is not None and low - (oracle_drop or 0.0) > margin
            shown = "not computed" if low is None else f"[{low:.3f}, {high:.3f}]"
            flags.append(
                f"{candidate}: high level with low transfer on {measure.title}: "
                f"{measure.headline} {level:.3f} (>= {high_level}) drops by {drop:.3f} "
                f"{shown} on transfer context {context!r}; {versus}; excess over the "
                f"oracle's drop > {margin} (spec §5 anti-Goodhart line: flagged, not "
                "celebrated)" + ("" if beyond else f"; {NOISE_DROP}")
            )
    return flags
