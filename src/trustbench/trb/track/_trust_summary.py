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
