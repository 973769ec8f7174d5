"""`rtb split`: allocate a corpus into a development set and a held-out set, related cases together.

The spec: "Keep related variants together when allocating development and held-out sets." Cases
of one domain group are variants of one template, and cases of one contrast family (a corpus
may declare `contrast_family` on its cases) differ in one detail on purpose; a held-out case
whose sibling sits in the development set is tuned against through that sibling. So the unit
allocated is a connected set of groups and families (`allocation_units`), never a case.

The allocation is seeded (`random.Random(seed)` shuffles the units, sorted first so the order
does not depend on the file system) and recorded in `SPLIT.json` beside the two corpora: the
seed, the fraction asked for, the source corpus's manifest hash and every unit with its side.
The record names held-out cases: it belongs with the set's owner, never in the sealed folder.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trustbench.errors import InputError

SPLIT_RECORD = "SPLIT.json"
SPLIT_FORMAT = "trustbench-rtb-split-v1"
SIDES = ("development", "heldout")


def allocation_units(cases: Iterable[dict[str, Any]]) -> list[list[str]]:
    """Case ids grouped so that a domain group or a contrast family is never divided.

    Two cases share a unit when they share a `group` or a `contrast_family` (transitively: a
    family spanning two groups joins them). Returns the units sorted, each sorted.
    """
    parent: dict[str, str] = {}

    def root(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for case in cases:
        case_node = f"case:{case['case_id']}"
        for field in ("group", "contrast_family"):
            if case.get(field):
                parent[root(case_node)] = root(f"{field}:{case[field]}")
        root(case_node)
    units: dict[str, list[str]] = {}
    for node in parent:
        if node.startswith("case:"):
            units.setdefault(root(node), []).append(node.removeprefix("case:"))
    return sorted(sorted(unit) for unit in units.values())


def allocate(units: list[list[str]], heldout_fraction: float, seed: int) -> list[str]:
    """The side of each unit: units in seeded order go held out until the fraction is reached."""
    if not 0 < heldout_fraction < 1:
        raise InputError("--heldout-fraction must be between 0 and 1 (exclusive)")
    if len(units) < 2:
        raise InputError(
            "the corpus has one group of related cases: it cannot be split without dividing it"
        )
    order = list(range(len(units)))
    random.Random(seed).shuffle(order)
    target = heldout_fraction * sum(len(unit) for unit in units)
    sides = ["development"] * len(units)
    taken = 0
    for index in order[:-1]:  # the last unit always stays in development: both sides non-empty
        if taken >= target:
            break
        sides[index] = "heldout"
        taken += len(units[index])
    return sides


def _write_side(corpus: Any, out: Path, files: dict[str, str], keep: set[str]) -> None:
    """Copy the corpus into `out` with only the cases in `keep`; certify it with a new manifest.

    The copy is no starter (a subset cannot satisfy a starter's grid), so its manifest is written
    with the `starter` flag removed.
    """
    from trustbench.rtb.corpus._load import write_manifest

    shutil.copytree(corpus.root, out)
    for case_id, rel in files.items():
        if case_id not in keep:
            (out / rel).unlink()
    manifest_path = out / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest.pop("starter", None)
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    write_manifest(out)


def split_corpus(
    corpus_root: Path | None, out: Path, *, heldout_fraction: float, seed: int
) -> dict[str, Any]:
    """Write `out/development/`, `out/heldout/` and `out/SPLIT.json`; returns the record.

    Raises:
        InputError: `out` holds files, the fraction is out of range, or the corpus is one unit.
    """
    from trustbench.rtb.corpus._load import load_corpus

    if out.exists() and any(out.iterdir()):
        raise InputError("the split folder already holds files", location=str(out))
    corpus = load_corpus(corpus_root)
    case_files = sorted(r for r in corpus.files if r.startswith("cases/") and r.endswith(".json"))
    raw = [json.loads((corpus.root / rel).read_bytes()) for rel in case_files]
    files = {str(case["case_id"]): rel for case, rel in zip(raw, case_files, strict=True)}
    units = allocation_units(raw)
    sides = allocate(units, heldout_fraction, seed)
    groups = {str(case["case_id"]): str(case.get("group", "")) for case in raw}
    record: dict[str, Any] = {
        "format": SPLIT_FORMAT,
        "corpus_version": corpus.version,
        "corpus_manifest_sha256": corpus.manifest_sha256,
        "seed": seed,
        "heldout_fraction": heldout_fraction,
        "kept_together": ["group", "contrast_family"],
        "units": [
            {"side": side, "groups": sorted({groups[c] for c in unit}), "cases": unit}
            for unit, side in zip(units, sides, strict=True)
        ],
    }
    out.mkdir(parents=True, exist_ok=True)
    for side in SIDES:
        keep = {c for unit, s in zip(units, sides, strict=True) if s == side for c in unit}
        record[side] = {"cases": len(keep), "folder": side}
        _write_side(corpus, out / side, files, keep)
    (out / SPLIT_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record
