"""Read the ledger back for grading and analysis, and export it as JSONL for other tools.

Graders read only this (never live state): every trial with its outcome and every attempt with
its raw response. Attempts of abandoned executions (a run killed mid-trial) are returned flagged
`counted = False` so no analysis counts them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from trustbench.core._outputs import output_writer
from trustbench.core.ledger._chain import TABLE_COLUMNS, iter_rows
from trustbench.core.ledger._contents import ContentReader
from trustbench.core.ledger._store import (
    JSON_COLUMNS,
    TrialWithAttempts,
    finished_trial_count,
    iter_trials_with_attempts,
    open_for_reading,
)
from trustbench.errors import CheckFailed

_Case = TypeVar("_Case")


class LedgerContents:
    """A ledger's rows, JSON columns parsed: held as lists, or streamed from the file.

    `read_ledger` reads every row at once (`trials`, `attempts`, `events`, `experiment`).
    `open_ledger` holds nothing: `iter_trials` streams each finished trial with its counted
    attempts from the file (what `report` grades from, in memory bounded by the trials that were
    in flight together), and the lists are read only when a grader asks for them.
    """

    def __init__(
        self,
        run_dir: Path | None = None,
        *,
        attempt_texts: bool = True,
        rows: tuple[list[dict[str, Any]], ...] | None = None,
    ) -> None:
        self._run_dir = run_dir
        self._attempt_texts = attempt_texts
        self._rows = rows

    def _all(self) -> tuple[list[dict[str, Any]], ...]:
        if self._rows is None:
            assert self._run_dir is not None
            self._rows = _read_all(self._run_dir, self._attempt_texts)
        return self._rows

    @property
    def run_dir(self) -> Path | None:
        """The run folder read (None for rows held in memory): where a track keeps run files."""
        return self._run_dir

    @property
    def trials(self) -> list[dict[str, Any]]:
        """Finished trials (completed and failed), in insertion order."""
        return self._all()[0]

    @property
    def attempts(self) -> list[dict[str, Any]]:
        """Every attempt; `counted` is False for attempts of abandoned executions."""
        return self._all()[1]

    @property
    def events(self) -> list[dict[str, Any]]:
        """Run events."""
        return self._all()[2]

    @property
    def experiment(self) -> dict[str, Any]:
        """The experiments row (manifest hash, format, creation time)."""
        found = self._all()[3]
        return found[0] if found else {}

    def events_of(self, kind: str) -> list[dict[str, Any]]:
        """The run events of one kind, in chain order, as `events` gives them.

        Streamed, only that kind's rows are read: `report` asks for one kind of event
        (`concurrency_changed`) of a ledger it streams, and reading `events` there parsed every
        trial and attempt row a second time (0.08 s of 2.7 s CPU on a 2,000-trial reviewer
        run, `python -m bench.report_speed`).
        """
        if self._rows is not None or self._run_dir is None:
            return [event for event in self.events if event["kind"] == kind]
        columns = (*TABLE_COLUMNS["events"], "row_hash")
        connection = open_for_reading(self._run_dir)
        try:
            contents = ContentReader(connection)
            cursor = connection.execute(
                f"SELECT {', '.join(columns)} FROM events WHERE kind = ? ORDER BY seq, id", (kind,)
            )
            return [_parsed(dict(zip(columns, values, strict=True)), contents) for values in cursor]
        finally:
            connection.close()

    def trials_in_plan(
        self, cases: Mapping[str, _Case], what: str
    ) -> Iterator[tuple[dict[str, Any], _Case]]:
        """Each finished trial with its case from the frozen plan, in insertion order.

        A grader looks every trial's case up in what the plan holds; a trial naming another
        case comes only from a hand-made or foreign ledger, and grading it would count an
        outcome the experiment never planned, so it is refused, not skipped.

        Args:
            cases: The frozen plan's cases by case id.
            what: What a case is, for the message (`scenario`, `trace`).

        Raises:
            CheckFailed: a trial names a case outside `cases`.
        """
        for trial in self.trials:
            case = cases.get(trial["case_id"])
            if case is None:
                raise CheckFailed(
                    f"trial {trial['trial_id']} names a {what} outside the frozen plan",
                    location="ledger.sqlite",
                )
            yield trial, case

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

    def iter_trials(self) -> Iterator[TrialWithAttempts]:
        """Every finished trial with its counted attempts, in insertion (chain) order.

        Streamed from the file when the rows are not held (see `core.ledger._store`): a grader
        that keeps only what it needs per trial holds no ledger row beyond the current one.
        """
        if self._rows is not None or self._run_dir is None:
            for trial in self.trials:
                yield trial, self.attempts_of(trial["trial_id"])
            return
        connection = open_for_reading(self._run_dir)
        try:
            contents = ContentReader(connection)
            texts = self._attempt_texts
            yield from iter_trials_with_attempts(
                connection, lambda row: _parsed(row, contents, texts), attempt_texts=texts
            )
        finally:
            connection.close()

    @cached_property
    def finished_count(self) -> int:
        """Finished trials (one row each), counted without reading them."""
        if self._rows is not None or self._run_dir is None:
            return len(self.trials)
        connection = open_for_reading(self._run_dir)
        try:
            return finished_trial_count(connection)
        finally:
            connection.close()


_JSON_COLUMNS = tuple(sorted(JSON_COLUMNS))


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
    for column in _JSON_COLUMNS:  # a tuple: no set made per row
        if isinstance(value := row.get(column), str):
            row[column] = json.loads(value)
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
    return LedgerContents(rows=_read_all(run_dir, attempt_texts), attempt_texts=attempt_texts)


def open_ledger(run_dir: Path, *, attempt_texts: bool = True) -> LedgerContents:
    """A run's ledger to stream (`LedgerContents.iter_trials`); nothing is read yet."""
    open_for_reading(run_dir).close()  # a missing or broken ledger fails here, not mid-report
    return LedgerContents(run_dir, attempt_texts=attempt_texts)


def _read_all(run_dir: Path, attempt_texts: bool) -> tuple[list[dict[str, Any]], ...]:
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
    experiments = [row for table, row in rows if table == "experiments"][:1]
    events = [row for table, row in rows if table == "events"]
    return trials, attempts, events, experiments


ModelIds = dict[str, dict[tuple[str | None, str | None], int]]
"""Candidate -> (requested id, reported id) -> attempts that recorded that pair."""


def model_ids_by_candidate(run_dir: Path) -> ModelIds:
    """Every (requested, reported) model id pair of each candidate's attempts, with counts.

    The spec asks to retain both ids: a hosted alias may resolve to another revision than the
    one requested, and only the server's answer says which served. Counted by SQLite over the
    attempts of finished trials (a trial's candidate is on its row), so a million-attempt
    ledger is read without holding a row.
    """
    connection = open_for_reading(run_dir)
    try:
        rows = connection.execute(
            "SELECT t.candidate, a.requested_model, a.reported_model, COUNT(*) "
            "FROM attempts AS a JOIN trials AS t ON t.trial_id = a.trial_id "
            "GROUP BY t.candidate, a.requested_model, a.reported_model"
        ).fetchall()
    finally:
        connection.close()
    found: ModelIds = {}
    for candidate, requested, reported, count in rows:
        found.setdefault(candidate, {})[(requested, reported)] = int(count)
    return found


def export_ledger(run_dir: Path, out: Path) -> int:
    """Write every ledger row as one JSON object per line, in chain order.

    Each line is `{"table": ..., **row}` with JSON columns parsed and `row_hash` kept. `out` is
    written by `output_writer`: a FIFO, a device or standard output is streamed to, never
    replaced; a regular file is written beside and renamed over, so a hard link to another file
    is never truncated.

    Returns:
        The number of rows written.
    """
    connection = open_for_reading(run_dir)
    count = 0
    try:
        contents = ContentReader(connection)
        with output_writer(out) as handle:
            for table, row in iter_rows(connection):
                parsed = _parsed(row, contents)
                line = json.dumps({"table": table, **parsed}, ensure_ascii=False) + "\n"
                handle.write(line.encode("utf-8"))
                count += 1
    finally:
        connection.close()
    return count
