"""The seven-cheat audit of `trb audit`: submitted cheats through `trb run`, one verdict each.

The cheats (`trustbench.trb.cheats`, written from the public contract only) are submitted as
`MODULE:FACTORY` candidates of a small `trb/profile` run, so they go through everything a lab's
adapter goes through: the conformance kit, the sandboxed worker, opaque ids, the blinded calls,
the harness-built no-r arm, and the combined verdict. The audit passes only when

- every cheat's verdict is "not trustworthy" (or it was refused at freeze, which is reported);
- the memoriser, whose only edge is reading the corpus, ends at chance: G* within
  `CHANCE_MARGIN` of 0 and balanced accuracy within it of 0.5;
- the control, the perfectly governed oracle submitted the same way, is not "not trustworthy"
  (a check that condemns an honest adapter catches nothing).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from trustbench.core import build_manifest, report_run, run_experiment, write_manifest
from trustbench.errors import CheckFailed, InputError
from trustbench.trb.cheats import CHEATS

CONTROL = ("control:governed", "trustbench.trb.instruments._oracles:GovernedOracle")
"""The honest control, submitted as a user adapter."""
CHANCE_MARGIN = 0.05
"""How close to chance the sandboxed memoriser must end (G* to 0, balanced accuracy to 0.5)."""

AUDIT_SPEC = """suite = "trb"
track = "profile"
trials_per_case = 1
concurrency = 1
[corpus]
builtin = "reference-world"
[analysis]
bootstrap_resamples = 400
[track_options]
corpus_sizes = {{ train = 40, dev = 2, eval = {eval}, transfer = {transfer} }}
corpus_seed = {seed}
splits = ["eval", "transfer_start", "transfer_cue_delay"]
measures = ["governance", "attribution", "viability", "navigability", "transfer"]
grounding_fit_traces = 40
viability_rollouts = 2
navigation_samples = 4
max_enumeration_nodes = 200
conformance_traces = 2
"""


def _spec(eval_traces: int, seed: int) -> str:
    text = AUDIT_SPEC.format(eval=eval_traces, transfer=6 * max(2, eval_traces // 3), seed=seed)
    for name, target in [*CHEATS.items(), CONTROL]:
        text += f'[[candidates]]\nname = "{name}"\nkind = "inprocess"\nmodel = "{target}"\n'
    return text


def _figure(record: dict[str, Any], candidate: str, name: str) -> float | None:
    found = next((f for f in record["figures"].get(candidate, []) if f["name"] == name), None)
    return None if found is None else found.get("estimate")


def cheat_audit(eval_traces: int = 12, seed: int = 7) -> list[dict[str, Any]]:
    """Run the cheats and the control through the track; one row per adapter.

    Returns:
        Rows with `adapter`, `expected`, `verdict`, `why` and `passed`.
    """
    with tempfile.TemporaryDirectory(prefix="trb-cheat-audit-") as folder:
        spec = Path(folder) / "spec.toml"
        spec.write_text(_spec(eval_traces, seed))
        run_dir = Path(folder) / "run"
        try:
            write_manifest(build_manifest(spec), run_dir)
        except (CheckFailed, InputError) as refused:  # a cheat the kit or the sandbox refused
            return [{"adapter": "(all)", "expected": "run", "verdict": "refused at freeze",
                     "why": str(refused), "passed": False}]  # fmt: skip
        run_experiment(run_dir)
        report_run(run_dir)
        record = json.loads((run_dir / "record.json").read_text())
    verdicts = record["trb"]["verdicts"]
    rows = []
    for name in [*CHEATS, CONTROL[0]]:
        entry = verdicts.get(name, {"verdict": "missing", "reasons": []})
        control = name == CONTROL[0]
        passed = entry["verdict"] != "not trustworthy" if control else (
            entry["verdict"] == "not trustworthy"
        )  # fmt: skip
        why = "; ".join(entry.get("reasons", [])[:2])
        if name == "memoriser":
            g_star = _figure(record, name, "G_star")
            ba = _figure(record, name, "balanced_accuracy")
            at_chance = (
                g_star is not None and ba is not None
                and abs(g_star) <= CHANCE_MARGIN and abs(ba - 0.5) <= CHANCE_MARGIN
            )  # fmt: skip
            passed = passed and at_chance
            why = f"G* {g_star}, balanced accuracy {ba} (chance: 0 and 0.5); {why}"
        rows.append({
            "adapter": name,
            "expected": "not 'not trustworthy'" if control else "not trustworthy",
            "verdict": entry["verdict"], "why": why, "passed": passed,
            "isolation": entry.get("isolation"),
        })  # fmt: skip
    return rows


def print_cheats(rows: list[dict[str, Any]]) -> None:
    """Print the cheat audit as a table."""
    from rich.markup import escape

    from trustbench.trb._cli_tables import print_audit_table, verdict_cell

    print_audit_table(
        "TRB cheat audit (seven cheats submitted through trb run; one verdict)",
        ("adapter", "expected", "verdict", "why", "ran in", "result"),
        [
            (escape(r["adapter"]), escape(r["expected"]), escape(r["verdict"]),
             escape(r["why"][:300]), escape(str(r.get("isolation"))),
             verdict_cell(r["passed"], "caught", "MISSED"))
            for r in rows
        ],
    )  # fmt: skip
