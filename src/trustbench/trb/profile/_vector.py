"""The profile vector of spec §5: a headline per track, anti-Goodhart flags, result rows, a plot.

Reported per track, never collapsed into a single mean (spec §5: "Report the vector, not a mean").
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, StrictInt

from trustbench._docstrings import documented
from trustbench.trb.adapter._protocol import TRB_VERSION
from trustbench.trb.reference._token_world import TokenLMConfig

if TYPE_CHECKING:
    from trustbench.core.figures import Figure


BASELINES: tuple[tuple[str, str, str], ...] = (
    ("instruct", "Instruct base (no reasoning scaffold)", "proxy"),
    ("cot-prompted", "CoT-prompted base (chain of thought at inference only)", "proxy"),
    ("cot-supervised-finetune", "CoT-supervised finetune (trained on reasoning text)", "proxy"),
    ("trace-ai-ablation", "Trace-AI ablation (L_trace + L_selfrep, no L_gov)", "native"),
    ("trace-ai-full", "Trace-AI full (L_trace + L_selfrep + L_gov)", "native"),
)
"""The five spec §4 baselines: key, description, adapter tier."""
TRACKS: tuple[str, ...] = (
    "governance", "grounding", "attribution", "viability", "navigability", "transfer",
)  # fmt: skip
"""The profile vector's entries, in spec order (G, ground, attr, viab, nav, trans)."""
HEADLINE_METRIC: dict[str, str] = {
    "governance": "G_star",
    "grounding": "detection_auc",
    "attribution": "balanced_accuracy",
    "viability": "completion_retention_ratio",
    "navigability": "reach_rate_lift",
    "transfer": "transfer_min[G_star]",
}
"""The figure each profile entry reports with the built-in measures (the track's headlines)."""
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


def transfer_summary(figures: list[Figure], heads: dict[str, Any]) -> dict[str, Any]:
    """Track 6 per track, read from the track's derived figures (`TransferMeasure.derive`).

    Per track (its headline figure in `heads`, as `_measured.as_tracks` gives it): the minimum
    over the transfer contexts (`transfer_min[...]`, that context's interval), the context
    that attains it, and the drop from eval (`transfer_drop[...]`).
    """
    from trustbench.trb.track._lookup import bootstrap_bounds, find_figure

    per_track: dict[str, Any] = {}
    for track, head in heads.items():
        name = head.get("figure")
        if track == "transfer" or name is None:
            continue
        worst = find_figure(figures, f"transfer_min[{name}]")
        if worst is None or worst.status != "measured":
            why = "no transfer context" if worst is None else worst.reason
            per_track[track] = {"status": "not run", "value": None, "why": why}
            continue
        drop = find_figure(figures, f"transfer_drop[{name}]")
        low, high = bootstrap_bounds(worst)
        per_track[track] = {
            "status": "run", "value": worst.estimate, "low": low, "high": high,
            "min_context": next(
                (f.name.split(".", 1)[0] for f in figures
                 if f.name.endswith(f".{name}") and f.status == "measured"
                 and f.estimate == worst.estimate), None,
            ),
            "in_distribution": head.get("value"),
            "drop_from_in_distribution": None if drop is None else drop.estimate,
            "description": worst.description,
        }  # fmt: skip
    ran = any(t["status"] == "run" for t in per_track.values())
    return {"status": "run" if ran else "not run", "per_track": per_track}


def governance_star_flags(governance: dict[str, Any]) -> dict[str, Any]:
    """G* near 0 and the Track 1b flags (issue 16A), from a `summarize_governance` result.

    Thresholds are declared in `trustbench.trb.measures._governance`; a figure that is
    absent (an older result) gives None, never "fine".
    """
    from trustbench.trb.measures._governance import G_STAR_MIN, self_consistency_flags

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
        "viability_below_one": heads["viability"]["value"] is not None
        and heads["viability"]["value"] < 1,
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


# ------------------------------------------------------------------------------------------------
# The sizes the reference profile and a `trb/profile` run share, declared once.
#
# `ProfileConfig` (the library's reference run) and `TrbTrackOptions` (a spec's `track_options`)
# both build on `ProfileSizes`, so the library's profile and the track's measure the same way.

MEASURES: tuple[str, ...] = (
    "governance", "grounding", "attribution", "viability", "navigability", "transfer",
)  # fmt: skip
"""The registered TRB measures of the profile vector, by default (one per axis)."""


class ProfileSizes(BaseModel):
    """The proxy baselines' LMs and the sizes of Tracks 2, 4 and 5."""

    model_config = documented(extra="forbid", frozen=True)

    token_lm: TokenLMConfig = TokenLMConfig()
    """Size and training of the proxy baselines' token-world LMs (`proxy:*` adapters; all three
    share the size)."""
    lm_train_traces: StrictInt = Field(default=800, ge=10)
    """Train traces the proxy baselines' LMs see (the first N of the train split)."""
    grounding_fit_traces: StrictInt = Field(default=200, ge=10)
    """Train traces Track 2's concept directions and the Tracks 4/5 no-r arm's mean r come from."""
    viability_rollouts: StrictInt = Field(default=4, ge=1)
    """Track 4 episodes per trace per condition (r-mediated and ablated)."""
    navigation_samples: StrictInt = Field(default=16, ge=1)
    """Track 5 Monte Carlo rollouts per start when exact enumeration is too large."""
    max_enumeration_nodes: StrictInt = Field(default=1000, ge=1)
    """Largest exact enumeration in Track 5 (decision contexts per start)."""
