"""Paired counterfactual collection: real human continuations Phi(r') for Tracks 1 and 3.

A collection protocol (TOML) is frozen first (`freeze_protocol`); `CollectionRun` serves its
sessions in a local web app whose every answer, timing and withdrawal is a row of the folder's
hash-chained ledger; `export_collection` turns the answers into a TRB corpus with human Phi(r')
(provenance: participant pseudonym, session, protocol hash), its synthetic-only twin and a
report of the synthetic:human share per split and the inter-participant agreement.
See `docs/trb-collection.md`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

if TYPE_CHECKING:
    from trustbench.trb.collect._export import agreement, export_collection
    from trustbench.trb.collect._protocol import (
        CollectionProtocol,
        FrozenProtocol,
        freeze_protocol,
        load_protocol,
        read_frozen,
    )
    from trustbench.trb.collect._serve import CollectionRun
    from trustbench.trb.collect._store import CollectionStore

__all__ = [
    "CollectionProtocol",
    "CollectionRun",
    "CollectionStore",
    "FrozenProtocol",
    "agreement",
    "export_collection",
    "freeze_protocol",
    "load_protocol",
    "read_frozen",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
