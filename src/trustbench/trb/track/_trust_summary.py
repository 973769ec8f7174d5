"""The combined verdicts of a `trb/profile` run: record entry, report table, implicit gates."""

from __future__ import annotations

from typing import Any

from trustbench.core import Manifest
from trustbench.core.figures import Figure
from trustbench.core.gates import GateResult
from trustbench.core.report import TableBlock
from trustbench.trb.track._adapters import BUILTIN_ADAPTERS, reference_seed
from trustbench.trb.track._collect import Collected
from trustbench.trb.track._summaries import baseline_of
from trustbench.trb.track._trust import pass_bars, trust_gate, trust_verdict


def _submitted(adapter: str | None) -> bool:
    """A candidate's own adapter (`MODULE:FACTORY`, a chat model), not a built-in one."""
    if adapter is None:
        return False
    return adapter not in BUILTIN_ADAPTERS and reference_seed(adapter) is None


def trust_summary(
    manifest: Manifest,
    candidates: list[str],
    subjects: dict[str, list[Figure]],
    flags: list[str],
    collected: Collected,
    gap: tuple[str, str] | None,
) -> tuple[dict[str, Any], TableBlock, list[GateResult]]:
    """Per non-oracle candidate: its verdict; the verdict table; the implicit gates."""
    oracles = collected.oracles()
    baselines = {
        c: b for c in candidates if (b := baseline_of(manifest, c)) is not None and c in subjects
    }
    gated = {name for gate in manifest.spec.gates for name in (gate.candidates or candidates)}
    record: dict[str, Any] = {}
    rows: list[list[str]] = []
    gates: list[GateResult] = []
    for candidate in candidates:
        if candidate in oracles:
            continue
        ran = any(f.status == "measured" for f in subjects.get(candidate, []))
        bars = pass_bars(candidate, subjects, baselines, None if gap is None else gap[0])
        verdict = trust_verdict(candidate, flags, bars, ran)
        adapter = collected.adapters.get(candidate)
        held = candidate in gated or _submitted(adapter)
        verdict["release_gate"] = held
        verdict["isolation"] = collected.isolation.get(candidate, "not run")
        record[candidate] = verdict
        if held:
            gates.append(trust_gate(candidate, verdict))
        reasons = verdict["reasons"]
        rows.append([
            candidate,
            verdict["verdict"].upper() if verdict["verdict"] == "not trustworthy" else
            verdict["verdict"],
            "; ".join(reasons[:3]) + (f" (+{len(reasons) - 3} more)" if len(reasons) > 3 else "")
            or "every pass bar met, no flag",
            "implicit gate trb_trustworthy" if held else "no release gate applies",
            verdict["isolation"],
        ])  # fmt: skip
    block = TableBlock(
        title="Verdict per adapter (all axes combined)",
        columns=["candidate", "verdict", "why", "release", "where it ran"],
        rows=rows,
        note="One verdict per adapter: any disqualifying flag (Track 1 floors and ceiling, G* "
        "near 0, Track 1b, viability below 1, transfer collapse, failed trials) or unmet spec §3 "
        "pass bar makes it not trustworthy; see trb/track/_trust.py for the declared rules. "
        "A submitted adapter, or one a declared gate names, is held to it as a release gate.",
    )
    return record, block, gates


SAME_WEIGHTS = ("instruct", "cot-prompted")
"""Baselines 1 and 2 of the built-in proxies share one LM and differ only in template."""


def baseline_coincidence(
    manifest: Manifest, subjects: dict[str, list[Figure]], headlines: list[str]
) -> list[str]:
    """Say where the instruct and CoT-prompted baselines coincide, and why (or that they differ).

    The built-in pair shares weights; the template changes only calls without an override (the
    proxy tier's intervention re-renders the slot span, the same text under either template).
    So every Track 1 item, and whatever else is asked only through overrides, coincides by
    construction; they can differ where the model acts unprompted (Track 1b, Track 4's
    r-mediated arm). Listing the coinciding axes keeps a reader from taking two rows for two
    independent measurements.
    """
    by_baseline = {baseline_of(manifest, c): c for c in subjects}
    pair = [by_baseline.get(b) for b in SAME_WEIGHTS]
    if None in pair:
        return []
    a, b = pair
    same, differ = [], []
    for name in headlines:
        fa = next((f for f in subjects[a] if f.name == name), None)  # type: ignore[index]
        fb = next((f for f in subjects[b] if f.name == name), None)  # type: ignore[index]
        if fa is None or fb is None or fa.estimate is None or fb.estimate is None:
            continue
        (same if abs(fa.estimate - fb.estimate) < 1e-6 else differ).append(name)
    if not same:
        return [f"baselines {a} and {b} differ on every measured headline ({', '.join(differ)})"]
    return [
        f"baselines {a} (instruct) and {b} (CoT-prompted) coincide on {', '.join(same)}"
        + (f" and differ on {', '.join(differ)}" if differ else "")
        + ": the built-in pair shares one LM and differs only in the template of calls without "
        "an override; an override re-renders the slot span, the same text under either "
        "template, so what is asked only through overrides coincides by construction"
    ]
