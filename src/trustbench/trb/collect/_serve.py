"""Open a frozen collection folder for serving: lock, protocol check, ledger, sessions, tokens.

`CollectionRun` takes the folder's `RunLock` (so two servers, or a server and `export`, never
write one ledger at once), re-checks the frozen protocol's hash, opens the ledger keyed to that
hash (refusing a broken chain), rebuilds every session from it and issues fresh access tokens.
Closing it appends `collect_serve_stopped` and releases the lock.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from aiohttp import web

import trustbench
from trustbench.core.ledger import Ledger, read_ledger
from trustbench.core.runs import RunLock
from trustbench.trb.collect._app import build_app
from trustbench.trb.collect._protocol import read_frozen
from trustbench.trb.collect._store import CollectionStore


@dataclass
class CollectionRun:
    """A collection folder open for serving (use as a context manager)."""

    folder: Path
    """The collection folder (`protocol.json`, `ledger.sqlite`)."""
    tokens: dict[str, str] = field(default_factory=dict)
    """Access token -> participant (fresh for every serve; give each only to its owner)."""
    store: CollectionStore | None = None
    """The sessions (set while open)."""
    app: web.Application | None = None
    """The app (set while open)."""
    _lock: RunLock | None = None
    _ledger: Ledger | None = None

    def links(self, base_url: str) -> dict[str, str]:
        """Participant -> personal session URL (withdrawn participants get none)."""
        assert self.store is not None
        return {
            who: f"{base_url}/s/{token}"
            for token, who in self.tokens.items()
            if not self.store.sessions[who].withdrawn
        }

    def __enter__(self) -> CollectionRun:
        lock = RunLock(self.folder)
        lock.__enter__()
        self._lock = lock
        try:
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
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            if self._ledger is not None:
                self._ledger.event("collect_serve_stopped", {"head": self._ledger.head})
                self._ledger.anchor(force=True)
                self._ledger.close()
        finally:
            self._ledger = None
            if self._lock is not None:
                self._lock.__exit__(None, None, None)
                self._lock = None
