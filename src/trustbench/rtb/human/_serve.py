"""Open a frozen human run for serving: lock, checks, ledger, sessions and access tokens.

`open_session_run` takes the run folder's lock (the same lock `trustbench run` takes, so the two
can never write one ledger at once), re-checks every frozen input exactly as `run` does, opens
the ledger (refusing a broken chain), loads the participants' plans and rebuilds their sessions.
Closing it pauses every open case clock, appends `run_finished` and releases the lock.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import trustbench
from trustbench._local_app import ServedFolder
from trustbench.core import Ledger, check_inputs, load_track, read_ledger, read_manifest
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.human._app import build_app
from trustbench.rtb.human._protocol import participant_plans
from trustbench.rtb.human._store import SessionStore
from trustbench.rtb.policy import policy_for
from trustbench.rtb.review.track import ReviewTrack


@dataclass
class SessionRun(ServedFolder):
    """A run folder open for serving (use as a context manager)."""

    run_dir: Path
    """The run folder."""
    store: SessionStore | None = None
    """The sessions (set while open)."""

    @property
    def served_folder(self) -> Path:
        """The run folder."""
        return self.run_dir

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

    def _close(self, ledger: Ledger) -> None:
        if self.store is not None:
            for candidate in self.store.sessions:
                self.store.pause(candidate)
            ledger.event(
                "run_finished",
                {
                    "finished": self.store.finished_count(),
                    "head": ledger.head,
                    "served_by": "human review app",
                },
            )
            ledger.anchor(force=True)


def open_session_run(run_dir: Path) -> SessionRun:
    """A `SessionRun` for `run_dir` (enter it to open; exit to pause clocks and close)."""
    return SessionRun(run_dir=Path(run_dir))
