"""Which metric definitions a TRB result was computed under, and refusing to compare across them.

Spec §7: "bump X only when a track's definition changes (which invalidates cross-version
comparison)". `TRB vX.Y` is a label a person bumps; a definition can change without it (the
G* floor of Track 1 changed after `TRB v0.2` was named, so `TRB v0.2` covers two headlines).
So every result row also carries `metric_digest`: the SHA-256 of

- the declared parameters of the headline definitions (which figure heads each track, the
  slot-accuracy confidence tolerance, Track 2's target AUC and sweep, R*'s member kinds), and
- the code identity of the measure functions: the SHA-256 of the source file of each measure a
  run lists (its class's module: the built-ins' `trb/track/_measures.py` and
  `trb/track/_trace_measures.py`, a registered measure's own module) and of the counting and
  world code they call (`trb/measures/_governance.py`, `trb/world/_corridor.py`,
  `trb/world/_text.py`).

Hashing whole files is conservative on purpose: an edit that changes no number (a comment)
changes the digest too, so two results with one digest were computed by the same code, never
"probably" the same. Two results are comparable only when both the version and the digest
agree; `refuse_cross_version` says which differ, naming both sides.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trustbench._canonical import file_sha256, json_sha256
from trustbench.errors import InputError
from trustbench.trb.adapter._protocol import TRB_VERSION
from trustbench.trb.measures._governance import (
    CONFIDENCE_TOLERANCE,
    R_STAR_KINDS,
    SWEEP_ALPHAS,
    TARGET_AUC,
)
from trustbench.trb.track._measures import TrbMeasure

COUNTING_MODULES: tuple[str, ...] = (
    "trustbench.trb.measures._governance",
    "trustbench.trb.world._corridor",
    "trustbench.trb.world._text",
)
"""Modules whose code every built-in measure counts with (TV, Phi, the exact world; the text
world's, whose exact dynamics Tracks 4 and 5 play in)."""


def headline_parameters(measures: Sequence[TrbMeasure]) -> dict[str, Any]:
    """The declared parameters that define the run's headline figures (module docstring)."""
    return {
        "headlines": {m.key: m.headline for m in measures},
        "axes": {m.key: m.axis for m in measures},
        "slot_confidence_tolerance": CONFIDENCE_TOLERANCE,
        "grounding_target_auc": TARGET_AUC,
        "grounding_sweep_alphas": list(SWEEP_ALPHAS),
        "r_star_kinds": list(R_STAR_KINDS),
    }


def _module_file(module: str) -> Path | None:
    """A module's source file, found without importing it again (None when it has none)."""
    spec = importlib.util.find_spec(module)
    origin = None if spec is None else spec.origin
    return Path(origin) if origin and origin.endswith(".py") else None


def code_identity(measures: Sequence[TrbMeasure]) -> dict[str, str]:
    """SHA-256 per source file of the measures' modules and of the counting modules.

    A module with no source file (a measure defined in a notebook) is named `no source file`:
    such a run's digest matches only another run of a module of that name without a file.
    """
    files: dict[str, str] = {}
    modules = [type(m).__module__ for m in measures] + list(COUNTING_MODULES)
    for module in dict.fromkeys(modules):
        path = _module_file(module)
        files[module] = "no source file" if path is None else file_sha256(path)
    return files


def metric_digest(measures: Sequence[TrbMeasure]) -> str:
    """`sha256:<hex>` of the headline parameters and the measures' code identity."""
    definition = {"parameters": headline_parameters(measures), "code": code_identity(measures)}
    return f"sha256:{json_sha256(definition)}"


def default_metric_digest() -> str:
    """The digest of the six built-in measures (rows computed outside a `trb/profile` run)."""
    from trustbench.trb.profile._vector import MEASURES
    from trustbench.trb.track._measures import load_measures

    return metric_digest([m for m, _ in load_measures(MEASURES)])


def refuse_cross_version(
    a: Mapping[str, Any], b: Mapping[str, Any], *, a_name: str, b_name: str
) -> None:
    """Refuse to compare two results whose TRB version or metric digest differ.

    `a` and `b` hold `trb_version` and `metric_digest` (a record's `trb` section or a result
    row); a result written before digests existed has none and is never comparable.

    Raises:
        InputError: naming both sides' version and digest.
    """
    versions = (a.get("trb_version"), b.get("trb_version"))
    digests = (a.get("metric_digest"), b.get("metric_digest"))
    if versions[0] == versions[1] and digests[0] == digests[1] and digests[0] is not None:
        return
    what = "TRB versions" if versions[0] != versions[1] else "metric-definition digests"
    raise InputError(
        f"cannot compare results computed under different {what}: {a_name} is "
        f"{versions[0] or 'unversioned'} ({digests[0] or 'no metric digest'}), {b_name} is "
        f"{versions[1] or 'unversioned'} ({digests[1] or 'no metric digest'}); rerun both "
        f"under one version ({TRB_VERSION} here)",
        location=f"{a_name} vs {b_name}",
    )


def compare_records(
    a: Mapping[str, Any], b: Mapping[str, Any], *, a_name: str, b_name: str
) -> list[dict[str, Any]]:
    """Headline rows of two `record.json` files side by side, refused across definitions.

    Rows pair by (candidate, split, metric) over the `trb.rows` both records hold.

    Raises:
        InputError: a record without a TRB section, or computed under another version/digest.
    """
    sections = []
    for record, name in ((a, a_name), (b, b_name)):
        trb = record.get("trb")
        if not isinstance(trb, Mapping) or "rows" not in trb:
            raise InputError("not the record of a trb/profile run (no trb.rows)", location=name)
        sections.append(trb)
    refuse_cross_version(
        {
            "trb_version": sections[0].get("version"),
            "metric_digest": sections[0].get("metric_digest"),
        },
        {
            "trb_version": sections[1].get("version"),
            "metric_digest": sections[1].get("metric_digest"),
        },
        a_name=a_name,
        b_name=b_name,
    )
    later = {(r["candidate"], r["split"], r["metric"]): r for r in sections[1]["rows"]}
    paired = []
    for row in sections[0]["rows"]:
        other = later.get((row["candidate"], row["split"], row["metric"]))
        if other is not None:
            paired.append({
                "candidate": row["candidate"], "split": row["split"], "metric": row["metric"],
                "a": row["estimate"], "b": other["estimate"],
            })  # fmt: skip
    return paired
