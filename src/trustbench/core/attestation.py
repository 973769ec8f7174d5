"""Core's public API for a record's in-toto statement (`record.intoto.json`) and its signature.

`check_record_statement` checks a run's statement (and its DSSE signature, when signed) against
the record, report and ledger head; `STATEMENT_FILE` is its file name; `REMOVED_KEY_ENV` is the
environment variable of the removed HMAC mode (`report` refuses to run while it is set); `pae`
is DSSE's pre-authentication encoding, what a signature covers. Names resolve lazily (see
`trustbench._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

if TYPE_CHECKING:
    from trustbench.core._attestation import (
        REMOVED_KEY_ENV,
        STATEMENT_FILE,
        check_record_statement,
    )
    from trustbench.core._signing import pae

__all__ = ["REMOVED_KEY_ENV", "STATEMENT_FILE", "check_record_statement", "pae"]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
