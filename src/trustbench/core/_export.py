"""Read the ledger back for grading and analysis, and export it as JSONL for other tools.

Graders read only this (never live state): every trial with its outcome and every attempt with
its raw response. Attempts of abandoned executions (a run killed mid-trial) are returned flagged
`counted = False` so no analysis counts them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from trustbench.core._ledger import JSON_COLUMNS, open_for_reading
from trustbench.core._ledger_chain import iter_rows
from trustbench.core._ledger_contents import ContentReader


@dataclass(frozen=True)
class LedgerContents:
    """All rows of a ledger, JSON columns parsed."""

    trials: list[dict[str, Any]]
    """Finished trials (completed and failed), in insertion order."""
    attempts: list[dict[str, Any]]
    """Every attempt; `counted` is False for attempts of abandoned executions."""
    events: list[dict[str, Any]]
    """Run events."""
    experiment: dict[str, Any]
    """The experiments row (manifest hash, format, creation time)."""

    def attempts_of(self, trial_id: str) -> list[dict[str, Any]]:
        """Counted attempts of one trial, in order."""
        return list(self._counted_by_trial.get(trial_id, ()))

    @cached_property
    def _counted_by_trial(self) -> dict[str, list[dict[str, Any]]]:
        # Indexed once: scanning every attempt per call made grading each trial's attempts
        # quadratic in the run size (100,000 trials: ~10^10 comparisons).
        index: dict[str, list[dict[str, Any]]] = {}
        for attempt in self.attempts:
            if attempt["counted"]:
                index.setdefault(attempt["trial_id"], []).append(attempt)
        return index


def _parsed(
    row: dict[str, Any], contents: ContentReader, attempt_texts: bool = True
) -> dict[str, Any]:
    if "request" in row and not attempt_texts:
        # Left out, not set to None: a grader that reads them after saying it does not fails
        # loudly (KeyError) instead of grading an empty request.
        del row["request"], row["raw_response"]
    elif "request" in row:  # formats 2 and 3 store texts apart, by digest: put them back
        row["request"] = contents.request_text(row["request"])
        row["raw_response"] = contents.response_text(row["raw_response"])
    for column in JSON_COLUMNS & row.keys():
        if isinstance(row[column], str):
            row[column] = json.loads(row[column])
    return row


def read_ledger(run_dir: Path, *, attempt_texts: bool = True) -> LedgerContents:
    """Read every row of a run's ledger (run `verify` first to trust it).

    Args:
        run_dir: The run folder.
        attempt_texts: Whether attempts carry their `request` and `raw_response` (decompressed,
            the request parsed). A grader that reads only outcomes and attempt counts passes
            False: the texts are most of a ledger (a 7 kB review request per attempt) and held
            parsed they were most of `report`'s memory (issue 30). The keys are then absent.
    """
    connection = open_for_reading(run_dir)
    try:
        contents = ContentReader(connection)
        rows = [
            (table, _parsed(row, contents, attempt_texts)) for table, row in iter_rows(connection)
        ]
    finally:
        connection.close()
    trials = [row for table, row in rows if table == "trials"]
    final_execution = {row["trial_id"]: row["execution"] for row in trials}
    attempts = []
    for table, row in rows:
        if table == "attempts":
            row["counted"] = final_execution.get(row["trial_id"]) == row["execution"]
            attempts.append(row)
    experiment = next((row for table, row in rows if table == "experiments"), {})
    events = [row for table, row in rows if table == "events"]
    return LedgerContents(trials=trials, attempts=attempts, events=events, experiment=experiment)


def export_ledger(run_dir: Path, out: Path) -> int:
    """Write every ledger row as one JSON object per line, in chain order.

    Each line is `{"table": ..., **row}` with JSON columns parsed and `row_hash` kept.

    Returns:
        The number of rows written.
    """
    connection = open_for_reading(run_dir)
    count = 0
    # Written beside `out` and renamed over it: a hard link to another file is never truncated.
    temporary = out.with_name(f".{out.name}.tmp")
    try:
        contents = ContentReader(connection)
        with temporary.open("w", encoding="utf-8") as handle:
            for table, row in iter_rows(connection):
                parsed = _parsed(row, contents)
                handle.write(json.dumps({"table": table, **parsed}, ensure_ascii=False))
                handle.write("\n")
                count += 1
        temporary.replace(out)
    finally:
        connection.close()
        temporary.unlink(missing_ok=True)
    return count
