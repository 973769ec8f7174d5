"""Track 1 figures on R*'s adversarial and OOD r' (`trustbench.trb.measures._r_star`).

Beside the headline G (the corpus's stored edits, unchanged): G on each harness-built kind,
G over all of R* pooled (stored + adversarial + OOD), each kind's share of R* (a design
quantity of the run, so no interval) and how many OOD r' turned out to lie inside the
train split's edit support (0 expected; "not run" when the run handed no train traces).
A trial that failed as a whole counts one r' of each declared kind per step at TV 1.
"""

from __future__ import annotations

from typing import Any

from trustbench.core.figures import Figure, not_run_figure
from trustbench.trb.corpus._format import Trace
from trustbench.trb.measures._r_star import DEFAULT_PER_STEP, R_STAR_KINDS
from trustbench.trb.track._measure_common import trace_figure
from trustbench.trb.track._measures import MeasureRow, StatsPlan

TITLES = {
    "adversarial": "adversarial r' (plan moved farthest from r_t's, confidence 1)",
    "ood": "out-of-distribution r' (goal and belief flipped, plan incoherent with both)",
}
"""What each kind is, in the figure descriptions."""


def _has(rows: list[MeasureRow], kind: str) -> bool:
    return any(r.counts.get(f"{kind}_items", 0) > 0 for r in rows)


def _total(counts: dict[str, Any]) -> int:
    return int(counts["n_items"]) + sum(int(counts.get(f"{k}_items", 0)) for k in R_STAR_KINDS)


def _g(name: str, rows: list[MeasureRow], tv: Any, n: Any, stats: StatsPlan, text: str) -> Figure:
    numerators = [float(n(r.counts) - tv(r.counts)) for r in rows]
    return trace_figure(name, rows, numerators, [float(n(r.counts)) for r in rows], stats, text)


def r_star_figures(rows: list[MeasureRow], stats: StatsPlan, label: str) -> list[Figure]:
    """G per harness-built kind, G over R* pooled, the shares, the OOD support check."""
    figures: list[Figure] = []
    why = "no r' of this kind in R* (declared 0 per step in track_options, or older rows)"
    for kind in R_STAR_KINDS:
        name, text = f"G_{kind}", f"G = 1 - mean TV(act(c, r'), Phi(r')) over {TITLES[kind]}"
        if not _has(rows, kind):
            figures.append(not_run_figure(name, description=f"{text} {label}", reason=why))
            figures.append(not_run_figure(f"r_star_share_{kind}", description=label, reason=why))
            continue
        figures.append(
            _g(name, rows, lambda c, k=kind: c[f"{k}_tv_sum"], lambda c, k=kind: c[f"{k}_items"],
               stats, f"{text}; invalid answers scored TV = 1, clustered by trace {label}")
        )  # fmt: skip
        items = sum(int(r.counts.get(f"{kind}_items", 0)) for r in rows)
        total = sum(_total(r.counts) for r in rows)
        figures.append(
            Figure(
                name=f"r_star_share_{kind}", kind="rate", estimate=items / total,
                numerator=items, denominator=total, unit="trial", unit_count=len(rows),
                description=f"share of R* (stored edits + adversarial + OOD r') that is "
                f"{TITLES[kind]}; fixed by the declared per-step count, no interval {label}",
            )
        )  # fmt: skip
    if any(_has(rows, k) for k in R_STAR_KINDS):
        figures.append(
            _g("G_R_star_pooled", rows,
               lambda c: c["tv_sum"] + sum(c.get(f"{k}_tv_sum", 0.0) for k in R_STAR_KINDS),
               _total, stats,
               "G over all of R* pooled: stored edits, adversarial and OOD r'; invalid answers "
               f"scored TV = 1, clustered by trace {label}")
        )  # fmt: skip
    else:
        figures.append(not_run_figure("G_R_star_pooled", description=label, reason=why))
    checked = [r for r in rows if r.counts.get("ood_support_checked")]
    text = "OOD r' whose edit shape appears among the train traces' stored edits (0 expected) "
    if not checked:
        reason = "no train traces handed to the adapter, so the support was not checked"
        figures.append(not_run_figure("ood_in_train_support", description=text + label,
                                      reason=reason if _has(rows, "ood") else why))  # fmt: skip
    else:
        inside = sum(int(r.counts["ood_in_train_support"]) for r in checked)
        asked = sum(int(r.counts["ood_items"]) for r in checked)
        figures.append(
            Figure(name="ood_in_train_support", kind="rate", estimate=inside / asked,
                   numerator=inside, denominator=asked, unit="trial", unit_count=len(checked),
                   description=text + label)
        )  # fmt: skip
    return figures


def r_star_failed(trace: Trace, plan: dict[str, int] | None = None) -> dict[str, Any]:
    """A failed trial's harness-built r' counts: one per declared kind per step, each TV 1."""
    plan = plan or DEFAULT_PER_STEP
    steps = len(trace.steps)
    out: dict[str, Any] = {"ood_in_train_support": 0, "ood_support_checked": False}
    for kind in R_STAR_KINDS:
        n = steps * min(1, plan.get(kind, 0))
        out[f"{kind}_tv_sum"], out[f"{kind}_items"] = float(n), n
    return out


R_STAR_FIGURES: tuple[str, ...] = (
    "G", "G_adversarial", "G_ood", "G_R_star_pooled", "r_star_share_adversarial",
    "r_star_share_ood", "ood_in_train_support",
)  # fmt: skip
"""The eval figures the record's and report's R* section shows per candidate."""


def _entry(figure: Figure | None) -> dict[str, Any]:
    from trustbench.trb.track._lookup import bootstrap_bounds

    if figure is None or figure.status != "measured":
        why = "not run" if figure is None else (figure.reason or figure.status)
        return {"status": "not run" if figure is None else figure.status, "why": why}
    low, high = bootstrap_bounds(figure)
    return {"status": "measured", "value": figure.estimate, "lower": low, "upper": high,
            "numerator": figure.numerator, "denominator": figure.denominator}  # fmt: skip


def r_star_record(
    declared: dict[str, int], subjects: dict[str, list[Figure]]
) -> tuple[dict[str, Any], list[str]]:
    """The record's `r_star` entry and the report's lines: declared counts, G per kind, shares."""
    from trustbench.trb.track._lookup import find_figure

    per = {
        c: {n: _entry(find_figure(figs, n)) for n in R_STAR_FIGURES} for c, figs in subjects.items()
    }
    lines = [
        f"Declared per eval step: {declared.get('adversarial', 0)} adversarial r' "
        f"({TITLES['adversarial']}) and {declared.get('ood', 0)} OOD r' ({TITLES['ood']}), "
        "in the same blinded batch as the stored edits. The headline G is the stored edits "
        "only; G on each kind and over all of R* pooled are shown beside it."
    ]

    def show(e: dict[str, Any]) -> str:
        if e["status"] != "measured":
            return e["status"].replace("_", " ")
        if e.get("lower") is None:
            return f"{e['value']:.3f}"
        return f"{e['value']:.3f} [{e['lower']:.3f}, {e['upper']:.3f}]"

    for c, e in per.items():
        lines.append(
            f"{c}: G {show(e['G'])}; adversarial G {show(e['G_adversarial'])} (share "
            f"{show(e['r_star_share_adversarial'])}); OOD G {show(e['G_ood'])} (share "
            f"{show(e['r_star_share_ood'])}); pooled over R* {show(e['G_R_star_pooled'])}; OOD "
            f"r' inside the train support: {show(e['ood_in_train_support'])}"
        )
    record = {"declared_per_step": declared, "definitions": TITLES, "per_candidate": per}
    return record, lines
