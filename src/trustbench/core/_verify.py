"""`verify`: recompute the manifest hash, the ledger chain and head, and the frozen inputs."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from trustbench.core._ledger import (
    NOT_A_LEDGER,
    TABLE_COLUMNS,
    ends_signed_off,
    open_for_reading,
)
from trustbench.core._ledger_integrity import UNREADABLE, ledger_problems
from trustbench.core._manifest import Manifest, check_inputs, read_manifest
from trustbench.core._prefetch import prefetch_ledger
from trustbench.core._registry import load_track
from trustbench.errors import TrustbenchError


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
    trials_rerun_after_cut: int = 0
    """Trials run again after finished trials were found cut off the ledger's end: the total
    of the `cut_trials_rerun` events `run --rerun-cut` recorded."""

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems

    @property
    def interrupted(self) -> bool:
        """True when the ledger does not end signed off (`INTERRUPTED`): a resumable run."""
        return INTERRUPTED in self.problems

    @property
    def alterations(self) -> list[str]:
        """The integrity failures: every problem but `INTERRUPTED` (refuse to report on these)."""
        return [problem for problem in self.problems if problem != INTERRUPTED]


def verify_run(run_dir: Path) -> VerifyReport:
    """Verify a run folder: manifest, ledger chain and file, recorded heads, sign-offs, inputs.

    The chain proves no row was altered, removed or reordered; `ledger.head` (see
    `_ledger_head`) catches rows cut off the end and a chain re-hashed after an edit; each
    `run_finished` sign-off must match the trials before it; the corpus and prompt files are
    re-hashed against the manifest; SQLite's `integrity_check` and the schema
    (`_ledger_integrity`) cover what no query of the chain reads; the head a written
    `record.intoto.json` states must still be in the ledger (`_ledger_head`). A ledger of an
    interrupted run (intact, but not ending with a sign-off) fails too, and says so: resume it
    with `trustbench run`.

    Raises:
        CheckFailed: when the manifest was changed (raised by `read_manifest`) or the ledger file
            is empty or not a SQLite database.
        InputError: when the folder has no manifest or ledger.
    """
    manifest = read_manifest(run_dir)
    prefetch_ledger(run_dir)  # every page is read: let the kernel read the file ahead
    report = verify_ledger(run_dir, manifest.manifest_sha256, manifest.plan.trials)
    report.problems += input_problems(manifest)
    return report


def verify_ledger(run_dir: Path, manifest_sha256: str, planned_trials: int) -> VerifyReport:
    """The ledger's part of `verify_run` (all but the frozen inputs) for a manifest read before.

    It reads only the run folder's files, never the registries of this process, so it can run
    in a second process (`core/_verify_beside.py`).
    """
    report = VerifyReport(manifest_sha256, planned_trials=planned_trials)
    connection = open_for_reading(run_dir)
    try:
        report.problems = ledger_problems(connection, run_dir, manifest_sha256)
        report.rows = sum(
            connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in TABLE_COLUMNS
        )
        report.finished_trials = connection.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
        report.trials_rerun_after_cut = _rerun_after_cut(connection)
        if not report.problems and not ends_signed_off(connection):
            report.problems.append(INTERRUPTED)
    except UNREADABLE as error:
        report.problems.insert(0, f"{NOT_A_LEDGER}: {error}")
    finally:
        connection.close()
    return report


INTERRUPTED = (
    "the ledger does not end with a run_finished event: the run was interrupted "
    "(resume it with `trustbench run`)"
)
"""The one verify problem that is not an integrity failure: `report` still reports such a run,
marked incomplete."""


def _rerun_after_cut(connection: sqlite3.Connection) -> int:
    """The trials `run --rerun-cut` decided to run again, over all its recorded decisions."""
    return sum(
        int(json.loads(data).get("rerun", 0))
        for (data,) in connection.execute("SELECT data FROM events WHERE kind = 'cut_trials_rerun'")
    )


def input_problems(manifest: Manifest) -> list[str]:
    """Re-hash the corpus, prompts and every other frozen input against the manifest."""
    try:
        track, _ = load_track(manifest.spec.track_id)
        check_inputs(manifest, track)
    except TrustbenchError as error:
        return [f"frozen inputs: {error}"]
    return []
