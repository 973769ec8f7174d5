"""Open a frozen human run for serving: lock, checks, ledger, sessions and access tokens.

`open_session_run` takes the run folder's lock (the same lock `trustbench run` takes, so the two
can never write one ledger at once), re-checks every frozen input exactly as `run` does, opens
the ledger (refusing a broken chain), loads the participants' plans and rebuilds their sessions.
Closing it pauses every open case clock, appends `run_finished` and releases the lock.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from aiohttp import web

import trustbench
from trustbench.core import check_inputs, load_track, read_ledger, read_manifest
from trustbench.core.ledger import Ledger
from trustbench.core.runs import RunLock
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.human._app import build_app
from trustbench.rtb.human._protocol import participant_plans
from trustbench.rtb.human._store import SessionStore
from trustbench.rtb.policy import policy_for
from trustbench.rtb.review.track import ReviewTrack


@dataclass
class SessionRun:
    """A run folder open for serving (use as a context manager)."""

    run_dir: Path
    """The run folder."""
    tokens: dict[str, str] = field(default_factory=dict)
    """Access token -> human candidate name (fresh for every serve; print each to its owner)."""
    store: SessionStore | None = None
    """The sessions (set while open)."""
    app: web.Application | None = None
    """The review app (set while open)."""
    _lock: RunLock | None = None
    _ledger: Ledger | None = None

    def links(self, base_url: str) -> dict[str, str]:
        """Candidate -> personal session URL."""
        return {candidate: f"{base_url}/s/{token}" for token, candidate in self.tokens.items()}

    def __enter__(self) -> SessionRun:
        lock = RunLock(self.run_dir)
        lock.__enter__()
        self._lock = lock
        try:
            self._open()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _open(self) -> None:
        manifest = read_manifest(self.run_dir)
        track, _ = load_track(manifest.spec.track_id)
        if not isinstance(track, ReviewTrack):
            raise InputError(
                f"a {manifest.spec.track_id} run has no human sessions", location=str(self.run_dir)
            )
        keys = check_inputs(manifest, track)
        corpus = track.corpus(manifest.corpus.root)
        plans = participant_plans(manifest, corpus)
        self._ledger = Ledger.open(self.run_dir, manifest.manifest_sha256)
        contents = read_ledger(self.run_dir)
        planned = {key.trial_id for key in keys}
        if not {t["trial_id"] for t in contents.trials} <= planned:
            raise CheckFailed("the ledger holds trials outside the frozen plan", location="ledger")
        labels = {
            plan.candidate: plan.participant.recommendation.configuration
            for plan in plans
            if plan.participant.recommendation is not None
        }
        self.store = SessionStore(self._ledger, corpus, plans, contents, labels)
        self.tokens = {secrets.token_urlsafe(24): plan.candidate for plan in plans}
        finished = self.store.finished_count()
        self._ledger.event(
            "run_started",
            {
                "pid": os.getpid(),
                "trustbench_version": trustbench.__version__,
                "planned": len(keys),
                "finished_before": finished,
                "remaining": len(keys) - finished,
                "served_by": "trustbench rtb human serve",
            },
        )
        self._ledger.anchor(force=True)
        reasons = policy_for(corpus.policy_id).reason_meaning
        self.app = build_app(self.store, self.tokens, corpus.review_prompt, reasons)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            if self._ledger is not None and self.store is not None:
                for candidate in self.store.sessions:
                    self.store.pause(candidate)
                self._ledger.event(
                    "run_finished",
                    {
                        "finished": self.store.finished_count(),
                        "head": self._ledger.head,
                        "served_by": "human review app",
                    },
                )
                self._ledger.anchor(force=True)
            if self._ledger is not None:
                self._ledger.close()
        finally:
            self._ledger = None
            if self._lock is not None:
                self._lock.__exit__(None, None, None)
                self._lock = None


def open_session_run(run_dir: Path) -> SessionRun:
    """A `SessionRun` for `run_dir` (enter it to open; exit to pause clocks and close)."""
    return SessionRun(run_dir=Path(run_dir))
