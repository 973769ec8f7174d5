"""Surface features of a candidate-visible input, read generically from its JSON.

The shortcut audit asks whether a rule with no understanding of the domain can reach the
reference decisions. Such a rule must see exactly what a candidate sees, so every feature here is
computed from the exported `CandidateInput` JSON (never the answer key), and generically: records
are any objects in `evidence`, their `kind` and `status` are whatever strings they carry, and the
proposal's parameters are compared with whichever evidence object shares the most keys with
them. The same code therefore runs on any corpus version whose input has a `proposal` and an
`evidence` list. `evaluation_id` is ignored (it is random per export and carries no signal).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from trustbench.rtb.corpus._normalise import equivalent

_WORD = re.compile(r"[a-z][a-z0-9_-]{2,}")
_UNAVAILABLE = frozenset({"unavailable", "degraded"})


def _visible(document: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key != "evaluation_id"}


def _records(document: dict[str, Any]) -> list[dict[str, Any]]:
    evidence = document.get("evidence")
    return [r for r in evidence if isinstance(r, dict)] if isinstance(evidence, list) else []


def _objects(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _objects(item)
    elif isinstance(value, list):
        for item in value:
            yield from _objects(item)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def statuses(document: dict[str, Any]) -> list[str]:
    """The `status` string of every evidence record that has one, in order."""
    return [r["status"] for r in _records(document) if isinstance(r.get("status"), str)]


def parameter_differences(document: dict[str, Any]) -> int:
    """Proposal parameters that differ from the evidence object sharing the most keys with them.

    No domain knowledge: the counterpart is found by key overlap alone (ties: first in document
    order), and values compare under the policy normalisation. 0 when nothing overlaps.
    """
    proposal = document.get("proposal")
    parameters = proposal.get("parameters") if isinstance(proposal, dict) else None
    if not isinstance(parameters, dict) or not parameters:
        return 0
    best: dict[str, Any] | None = None
    best_overlap = 0
    for candidate in _objects(_records(document)):
        overlap = len(set(candidate) & set(parameters))
        if overlap > best_overlap:
            best, best_overlap = candidate, overlap
    if best is None:
        return 0
    keys = set(parameters) | set(best)
    return sum(
        1
        for key in keys
        if key not in parameters or key not in best or not equivalent(parameters[key], best[key])
    )


def revision_occurrences(document: dict[str, Any]) -> int:
    """How often the proposal's `resource_revision` string occurs in the serialised input."""
    proposal = document.get("proposal")
    revision = proposal.get("resource_revision") if isinstance(proposal, dict) else None
    if not isinstance(revision, str) or not revision:
        return 0
    return json.dumps(_visible(document), sort_keys=True).count(revision)


def record_kinds(document: dict[str, Any]) -> list[str]:
    """The `kind` of every evidence record, in presentation order (`?` when absent)."""
    return [str(r.get("kind", "?")) for r in _records(document)]


def word_features(document: dict[str, Any]) -> dict[str, float]:
    """Presence (1.0) of every lower-case word of 3+ characters in any string of the input."""
    words = {w for text in _strings(_visible(document)) for w in _WORD.findall(text.casefold())}
    return {f"word:{w}": 1.0 for w in sorted(words)}


def structure_features(document: dict[str, Any]) -> dict[str, float]:
    """Counts by kind and status, parameter differences, revision counts, record positions."""
    kinds = record_kinds(document)
    features: dict[str, float] = {"records": float(len(kinds))}
    for index, (kind, record) in enumerate(zip(kinds, _records(document), strict=True)):
        features[f"kind:{kind}"] = features.get(f"kind:{kind}", 0.0) + 1
        status = record.get("status")
        if isinstance(status, str):
            features[f"status:{status}"] = features.get(f"status:{status}", 0.0) + 1
            features[f"kind:{kind}&status:{status}"] = (
                features.get(f"kind:{kind}&status:{status}", 0.0) + 1
            )
        # Relative position of the first record of each kind (0 = first, 1 = last).
        features.setdefault(f"position:{kind}", index / max(len(kinds) - 1, 1))
    if kinds:
        features[f"first:{kinds[0]}"] = 1.0
        features[f"last:{kinds[-1]}"] = 1.0
    differences = parameter_differences(document)
    features["parameter_differences"] = float(differences)
    features["any_parameter_differs"] = float(differences > 0)
    features["revision_occurrences"] = float(revision_occurrences(document))
    return features


def surface_features(document: dict[str, Any]) -> dict[str, float]:
    """Every surface feature of one input: structure plus word presence."""
    return {**structure_features(document), **word_features(document)}


def is_unavailable(status: str) -> bool:
    """True for a status word that says a service could not be consulted."""
    return status in _UNAVAILABLE
