"""Open a frozen collection folder for serving: lock, protocol check, ledger, sessions, tokens.

`CollectionRun` takes the folder's `RunLock` (so two servers, or a server and `export`, never
write one ledger at once), re-checks the frozen protocol's hash, opens the ledger keyed to that
hash (refusing a broken chain), rebuilds every session from it and issues fresh access tokens.
Closing it appends `collect_serve_stopped` and releases the lock.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import trustbench
from trustbench._local_app import ServedFolder
from trustbench.core import Ledger, read_ledger
from trustbench.trb.collect._app import build_app
from trustbench.trb.collect._protocol import read_frozen
from trustbench.trb.collect._store import CollectionStore


@dataclass
class CollectionRun(ServedFolder):
    """A collection folder (`protocol.json`, `ledger.sqlite`) open for serving (context manager)."""

    folder: Path
    """The collection folder."""
    store: CollectionStore | None = None
    """The sessions (set while open)."""

    @property
    def served_folder(self) -> Path:
        """The collection folder."""
        return self.folder

    def _serves(self, participant: str) -> bool:
        """Withdrawn participants get no session link."""
        assert self.store is not None
        return not self.store.sessions[participant].withdrawn

    def _open(self) -> None:
        frozen = read_frozen(self.folder)
        self._ledger = Ledger.open(self.folder, frozen.protocol_sha256)
        self.store = CollectionStore(self._ledger, frozen, read_ledger(self.folder))
        self.tokens = {secrets.token_urlsafe(24): p.id for p in frozen.protocol.participants}
        self._ledger.event(
            "collect_serve_started",
            {
                "pid": os.getpid(),
                "trustbench_version": trustbench.__version__,
                "items_complete": {
                    who: s.position for who, s in sorted(self.store.sessions.items())
                },
            },
        )
        self._ledger.anchor(force=True)
        self.app = build_app(self.store, self.tokens)

    def _close(self, ledger: Ledger) -> None:
        ledger.event("collect_serve_stopped", {"head": ledger.head})
        ledger.anchor(force=True)
