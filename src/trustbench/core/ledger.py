"""Core's public API for a run's ledger: writing rows, reading them back, its recorded head.

`Ledger` is the append-only, hash-chained SQLite ledger of a run (`ledger.sqlite`);
`read_ledger` / `export_ledger` read it into `LedgerContents`; `TABLE_COLUMNS` names the columns
each table's rows are hashed over; `write_head` records the head (`ledger.head`) that catches
rows cut off the end. Names resolve lazily (see `trustbench._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

if TYPE_CHECKING:
    from trustbench.core._export import LedgerContents, export_ledger, read_ledger
    from trustbench.core._ledger import TABLE_COLUMNS, Ledger
    from trustbench.core._ledger_head import write_head

__all__ = [
    "TABLE_COLUMNS",
    "Ledger",
    "LedgerContents",
    "export_ledger",
    "read_ledger",
    "write_head",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
