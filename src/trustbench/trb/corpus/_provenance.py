"""Counterfactual provenance: the synthetic share and the spec's 3:1 cap (§5, whitepaper §4.4)."""

from __future__ import annotations

from trustbench.errors import CheckFailed
from trustbench.trb.corpus._format import SYNTHETIC_TO_HUMAN_CAP, ProvenanceShare, Trace


def provenance_share(traces: list[Trace]) -> ProvenanceShare:
    """Count counterfactual provenance and decide the cap status (refusal is `check_cap`)."""
    synthetic = human = 0
    for trace in traces:
        for step in trace.steps:
            for cf in step.counterfactuals:
                if cf.provenance == "synthetic":
                    synthetic += 1
                else:
                    human += 1
    total = synthetic + human
    if human == 0:
        status = "no_human_data"
    elif synthetic / human <= SYNTHETIC_TO_HUMAN_CAP:
        status = "met"
    else:
        status = "violated"
    return ProvenanceShare(
        synthetic=synthetic,
        human=human,
        synthetic_share=synthetic / total if total else None,
        cap_status=status,  # type: ignore[arg-type]
    )


def check_cap(share: ProvenanceShare, kind: str, where: str) -> None:
    """Refuse a corpus whose provenance contradicts its declared kind.

    A `reference_world` corpus is allowed with no human data because it claims none: its
    results are labelled reference-agent results, not a TRB score. A corpus claiming human
    paired data must have some. A human corpus *over* the spec's 3:1 synthetic:human cap is
    loaded, not refused, so that what was collected can still be looked at: its manifest says
    `cap_status = "violated"` and every report labels it over the cap and not a TRB score
    (`trb/track/_summaries.py`).
    """
    if share.human and kind == "reference_world":
        raise CheckFailed(
            f"corpus declares kind 'reference_world' but holds {share.human} human counterfactuals",
            location=where,
        )
    if kind == "human_paired" and share.cap_status == "no_human_data":
        raise CheckFailed(
            "corpus declares kind 'human_paired' but holds 0 human counterfactuals "
            f"({share.synthetic} synthetic)",
            location=where,
        )


def over_cap_label(share: ProvenanceShare) -> str | None:
    """The label every report of an over-cap corpus carries (None when the cap holds)."""
    if share.cap_status != "violated":
        return None
    ratio = share.synthetic / share.human
    return (
        f"OVER the spec cap: synthetic:human counterfactual ratio {ratio:.2f}:1 exceeds "
        f"{SYNTHETIC_TO_HUMAN_CAP:.0f}:1 ({share.synthetic} synthetic, {share.human} human); "
        "these results are not a TRB score"
    )
