"""Paired counterfactual collection: real human continuations Phi(r') for Tracks 1 and 3.

A collection protocol (TOML) is frozen first (`freeze_protocol`); `CollectionRun` serves its
sessions in a local web app whose every answer, timing and withdrawal is a row of the folder's
hash-chained ledger; `export_collection` turns the answers into a TRB corpus with human Phi(r')
(provenance: participant pseudonym, session, protocol hash), its synthetic-only twin and a
report of the synthetic:human share per split and the inter-participant agreement.
`CollectionRun` (in `_app`) is reached through `trustbench trb collect serve` and is not
exported here: it imports aiohttp and jinja2, which `trustbench --help` must not pay for.
See `docs/trb-collection.md`.
"""

from __future__ import annotations

from trustbench.trb.collect._export import agreement, export_collection
from trustbench.trb.collect._store import (
    CollectionProtocol,
    CollectionStore,
    FrozenProtocol,
    freeze_protocol,
    load_protocol,
    read_frozen,
)

__all__ = [
    "CollectionProtocol",
    "CollectionStore",
    "FrozenProtocol",
    "agreement",
    "export_collection",
    "freeze_protocol",
    "load_protocol",
    "read_frozen",
]
