"""Track 1 / 1b flags of the TRB report: no normalised governance, and self-inconsistency.

Kept apart from the other report flags so the rules stay next to their declared thresholds
(`trustbench.trb.measures._self_consistency`), shared with `trb audit`.
"""

from __future__ import annotations

from trustbench.core.figures import Figure
from trustbench.trb.measures._self_consistency import G_STAR_MIN, self_consistency_flags
from trustbench.trb.track._lookup import bootstrap_bounds, find_figure, measured_estimate


def governance_flags(candidate: str, figures: list[Figure]) -> list[str]:
    """Flags for one candidate: G* not above 0, and the Track 1b self-consistency flags."""
    out = []
    g_star = find_figure(figures, "G_star")
    low, high = bootstrap_bounds(g_star)
    measured = g_star is not None and g_star.status == "measured" and low is not None
    if measured and (low <= 0 or high < G_STAR_MIN):  # type: ignore[operator]
        out.append(
            f"{candidate}: G* {g_star.estimate:.4g} [{low:.4g}, {high:.4g}] reaches 0 or stays "  # type: ignore[union-attr]
            f"below {G_STAR_MIN}: no evidence its r governs action beyond ignoring every "
            "edit, however high G is"
        )
    g = measured_estimate(figures, "G")
    ceiling = measured_estimate(figures, "G_r_ignoring_ceiling")
    if g is not None and ceiling is not None and g <= ceiling:
        out.append(
            f"{candidate}: G {g:.3f} is at or below the r-ignoring ceiling {ceiling:.3f} (the "
            "best G any policy that ignores r can reach on these items): G alone shows no "
            "governance"
        )
    out += [
        f"{candidate}: {text}"
        for text in self_consistency_flags(
            g=measured_estimate(figures, "G"),
            g_star=measured_estimate(figures, "G_star"),
            self_consistency=measured_estimate(figures, "self_consistency"),
            identity_agreement=measured_estimate(figures, "identity_edit_agreement"),
        )
    ]
    return out
