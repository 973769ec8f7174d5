"""`verify`: recompute the manifest hash and the ledger chain; name the first broken row."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from trustbench.core._ledger import open_for_reading, verify_chain
from trustbench.core._manifest import read_manifest


@dataclass
class VerifyReport:
    """Outcome of verifying one run folder."""

    manifest_sha256: str
    """The manifest hash (recomputed and matching the recorded one)."""
    rows: int = 0
    """Ledger rows checked."""
    finished_trials: int = 0
    """Trials with a finished row."""
    planned_trials: int = 0
    """Trials in the frozen plan."""
    problems: list[str] = field(default_factory=list)
    """Integrity problems, the first altered or missing row first. Empty means intact."""

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems


def verify_run(run_dir: Path) -> VerifyReport:
    """Verify a run folder's manifest and ledger.

    The chain proves no row was altered, removed or reordered; a truncated tail is caught by
    requiring the ledger to end with a `run_finished` event (a ledger of an interrupted run
    fails this too, and says so: resume it with `trustbench run`).

    Raises:
        CheckFailed: when the manifest was changed (raised by `read_manifest`).
        InputError: when the folder has no manifest or ledger.
    """
    manifest = read_manifest(run_dir)
    report = VerifyReport(manifest.manifest_sha256, planned_trials=manifest.plan.trials)
    connection = open_for_reading(run_dir)
    try:
        report.problems = verify_chain(connection, manifest.manifest_sha256)
        report.rows = sum(
            connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in ("experiments", "trials", "attempts", "events")
        )
        report.finished_trials = connection.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
        if not report.problems:
            last = connection.execute(
                "SELECT kind, data FROM events ORDER BY seq DESC LIMIT 1"
            ).fetchone()
            max_seq = max(
                connection.execute(f"SELECT COALESCE(MAX(seq), 0) FROM {t}").fetchone()[0]
                for t in ("experiments", "trials", "attempts", "events")
            )
            last_event_seq = connection.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM events"
            ).fetchone()[0]
            if last is None or last[0] != "run_finished" or last_event_seq != max_seq:
                report.problems.append(
                    "the ledger does not end with a run_finished event: the run was interrupted "
                    "(resume it with `trustbench run`) or rows were cut off its end"
                )
            elif json.loads(last[1]).get("finished") != report.finished_trials:
                report.problems.append("the final run_finished event disagrees with the trial rows")
    finally:
        connection.close()
    return report
