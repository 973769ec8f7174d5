"""The profile vector of spec §5: a headline per track, anti-Goodhart flags, result rows, a plot.

Reported per track, never collapsed into a single mean (spec §5: "Report the vector, not a mean").
"""

from __future__ import annotations

import io
from typing import Any

from trustbench.trb.adapter._schema import TRB_VERSION

TRACKS: tuple[str, ...] = (
    "governance", "grounding", "attribution", "viability", "navigability", "transfer",
)  # fmt: skip
"""The profile vector's entries, in spec order (G, ground, attr, viab, nav, trans)."""
HEADLINE_METRIC: dict[str, str] = {
    "governance": "G",
    "grounding": "detection_auc_vs_random",
    "attribution": "balanced_accuracy",
    "viability": "completion_retention_ratio",
    "navigability": "reach_rate_lift",
    "transfer": "min_over_families_G",
}
"""The metric each profile entry reports."""
REFERENCE_LINE: dict[str, float] = {"grounding": 0.5, "attribution": 0.5, "viability": 1.0}
"""Dashed lines in the plot: chance for AUC and balanced accuracy, 1 for a retention ratio."""
HIGH_LEVEL: dict[str, float] = {
    "governance": 0.8, "grounding": 0.8, "attribution": 0.8,
    "viability": 1.2, "navigability": 0.2,
}  # fmt: skip
"""A headline at or above this is a "high level" for the anti-Goodhart flag."""
TRANSFER_DROP: dict[str, float] = {
    "governance": 0.1, "grounding": 0.1, "attribution": 0.1,
    "viability": 0.2, "navigability": 0.1,
}  # fmt: skip
"""A transfer drop above this (in-distribution minus min over families) is "low transfer"."""


def headlines(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The headline figure of Tracks 1-5 from `run_tracks` output."""

    def fig(d: dict[str, Any] | None) -> dict[str, Any]:
        d = d or {}
        return {"value": d.get("value"), "low": d.get("low"), "high": d.get("high")}

    g = results["grounding"]
    return {
        "governance": fig(results["governance"]["G"]),
        "grounding": fig(g.get("auc_vs_random")) if g.get("status") == "run" else fig(None),
        "attribution": fig(results["attribution"]["balanced_accuracy"]),
        "viability": fig(results["viability"]["completion_retention_ratio"]),
        "navigability": fig(results["navigability"]["lift"]),
    }


def governance_star_flags(governance: dict[str, Any]) -> dict[str, Any]:
    """G* near 0 and the Track 1b flags (issue 16A), from a `summarize_governance` result.

    Thresholds are declared in `trustbench.trb.measures._self_consistency`; a figure that is
    absent (an older result) gives None, never "fine".
    """
    from trustbench.trb.measures._self_consistency import G_STAR_MIN, self_consistency_flags

    def value(key: str) -> float | None:
        return (governance.get(key) or {}).get("value")

    star = governance.get("G_star") or {}
    low, high = star.get("low"), star.get("high")
    return {
        "g_star_near_zero": None if low is None or high is None else low <= 0 or high < G_STAR_MIN,
        "self_consistency": None if value("self_consistency") is None else self_consistency_flags(
            g=value("G"), g_star=value("G_star"), self_consistency=value("self_consistency"),
            identity_agreement=value("identity_edit_agreement"),
        ),
    }  # fmt: skip


def flags(results: dict[str, Any], heads: dict[str, Any], trans: dict[str, Any] | None) -> dict:
    """The profile's flags for one subject (see module docstring)."""
    floor = results["governance"]["null_edit_floor"]["G_minus_floor"]
    out: dict[str, Any] = {
        "g_at_or_below_null_edit_floor": floor["estimate"] <= 0
        or (floor["low"] is not None and floor["low"] <= 0),
        "viability_below_one": bool(results["viability"]["completion_retention_ratio"].get(
            "below_one")),
        "high_level_low_transfer": {},
        **governance_star_flags(results["governance"]),  # issue 16A: G* and Track 1b
    }  # fmt: skip
    for track, high in HIGH_LEVEL.items():
        t = (trans or {}).get("per_track", {}).get(track, {})
        value = heads[track]["value"]
        drop = t.get("drop_from_in_distribution")
        out["high_level_low_transfer"][track] = (
            None if value is None or drop is None else value >= high and drop > TRANSFER_DROP[track]
        )
    return out


def result_row(
    key: str, tier: str, corpus_sha: str, split: str, track: str, metric: str, fig: dict
) -> dict[str, Any]:
    """One flat result row (the same fields as Tracks 1 and 3 rows)."""
    return {
        "trb_version": TRB_VERSION,
        "corpus_sha256": corpus_sha,
        "adapter": key,
        "adapter_tier": tier,
        "split": split,
        "track": track,
        "metric": metric,
        "value": fig.get("value"),
        "low": fig.get("low"),
        "high": fig.get("high"),
        "numerator": fig.get("numerator"),
        "denominator": fig.get("denominator"),
        "data": "reference_world",
    }


def profile_svg(baselines: list[dict[str, Any]]) -> str:
    """Small-multiple bar plot: one panel per profile entry, one bar (with interval) each.

    Baselines not run, or entries not run for a baseline, are written "not run" in place
    of a bar (never drawn as zero).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(TRACKS), figsize=(2.3 * len(TRACKS), 2.8), sharey=False)
    keys = [b["baseline"] for b in baselines]
    for ax, track in zip(axes, TRACKS, strict=True):
        for i, b in enumerate(baselines):
            f = (b.get("profile") or {}).get(track) or {}
            v = f.get("value")
            if v is None:
                ax.text(i, 0, "not run", rotation=90, ha="center", va="bottom", fontsize=6)
                continue
            lo, hi = f.get("low"), f.get("high")
            err = None if lo is None else [[v - lo], [hi - v]]
            ax.bar(i, v, color=f"C{i}", yerr=err, capsize=2)
        named = [((b.get("profile") or {}).get(track) or {}).get("figure") for b in baselines]
        ax.set_title(f"{track}\n({next(filter(None, named), HEADLINE_METRIC[track])})", fontsize=7)
        ax.set_xticks(range(len(keys)), keys, rotation=60, ha="right", fontsize=6)
        ax.tick_params(axis="y", labelsize=6)
        ax.axhline(0, color="black", linewidth=0.5)
        if track in REFERENCE_LINE:  # chance (AUC, BA) or "no change" (retention ratio)
            ax.axhline(REFERENCE_LINE[track], color="grey", linewidth=0.8, linestyle="--")
    # One legend naming each series' colour (the same colour in every panel).
    from matplotlib.patches import Patch

    handles = [Patch(color=f"C{i}", label=key) for i, key in enumerate(keys)]
    fig.legend(handles=handles, loc="lower center", ncols=min(5, len(keys)), fontsize=6,
               frameon=False, bbox_to_anchor=(0.5, -0.02))  # fmt: skip
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    plt.close(fig)
    return buffer.getvalue()
