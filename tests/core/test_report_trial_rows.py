"""Per-trial rows live in `record.trials.jsonl` beside `record.json`, which names them by digest."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from trustbench.core.report._record import (
    TRIAL_ROWS_FILE,
    TrialRowSpool,
    iter_trial_rows,
    read_trial_rows,
    trial_rows_problems,
    write_trial_rows,
)
from trustbench.errors import CheckFailed, InputError


def _rows(count: int) -> Iterator[dict[str, object]]:
    for index in range(count):
        yield {"trial": index, "outcome": "permit" if index % 2 else "deny", "note": "é"}


def test_rows_written_from_an_iterator_read_back_per_part_in_order(tmp_path: Path) -> None:
    summary = write_trial_rows(
        tmp_path / TRIAL_ROWS_FILE, {"review": _rows(3), "control": iter([{"trial_id": "t"}])}
    )
    assert summary["file"] == TRIAL_ROWS_FILE
    assert summary["rows"] == {"review": 3, "control": 1}
    assert read_trial_rows(tmp_path, "review") == list(_rows(3))
    assert read_trial_rows(tmp_path, "control") == [{"trial_id": "t"}]
    assert [row["part"] for row in iter_trial_rows(tmp_path)] == ["review"] * 3 + ["control"]
    assert trial_rows_problems(tmp_path, {"trial_rows": summary}) == []


def test_an_edited_added_or_dropped_row_no_longer_matches_the_records_digest(
    tmp_path: Path,
) -> None:
    summary = write_trial_rows(tmp_path / TRIAL_ROWS_FILE, {"review": _rows(4)})
    record = {"trial_rows": summary}
    path = tmp_path / TRIAL_ROWS_FILE
    original = path.read_text(encoding="utf-8")
    lines = original.splitlines(keepends=True)
    for cheat in (
        original.replace('"deny"', '"permit"', 1),  # a denial turned into an approval
        "".join(lines[:-1]),  # a row dropped
        original + lines[0],  # a row repeated
    ):
        path.write_text(cheat, encoding="utf-8")
        assert trial_rows_problems(tmp_path, record), cheat
    path.unlink()
    assert "unreadable" in trial_rows_problems(tmp_path, record)[0]
    assert trial_rows_problems(tmp_path, {}) != []  # a record naming no rows file


def test_a_non_finite_value_is_refused_naming_the_part_and_row(tmp_path: Path) -> None:
    rows = [{"latency_s": 1.0}, {"latency_s": math.nan}]
    with pytest.raises(InputError) as raised:
        write_trial_rows(tmp_path / TRIAL_ROWS_FILE, {"review": rows})
    assert raised.value.location.endswith("#review/1/latency_s")
    assert not (tmp_path / TRIAL_ROWS_FILE).exists()  # nothing half-written is left


def test_a_missing_file_or_a_broken_line_is_a_clear_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(CheckFailed, match="run `trustbench report` first"):
        read_trial_rows(tmp_path, "review")
    (tmp_path / TRIAL_ROWS_FILE).write_text(
        json.dumps({"part": "review", "trial": 0}) + "\n{not json\n", encoding="utf-8"
    )
    with pytest.raises(CheckFailed, match="line 2 is not JSON") as raised:
        read_trial_rows(tmp_path, "review")
    assert raised.value.location == str(tmp_path / TRIAL_ROWS_FILE)


def test_a_spool_writes_the_same_file_as_an_iterator_of_the_same_rows(tmp_path: Path) -> None:
    spool = TrialRowSpool("review")
    for row in _rows(5):
        spool.add(row)
    assert list(spool) == list(_rows(5))  # read back as rows, for any other reader
    spooled = write_trial_rows(tmp_path / "a" / TRIAL_ROWS_FILE, {"review": spool})
    iterated = write_trial_rows(tmp_path / "b" / TRIAL_ROWS_FILE, {"review": _rows(5)})
    assert spooled == iterated
    assert (tmp_path / "a" / TRIAL_ROWS_FILE).read_bytes() == (
        tmp_path / "b" / TRIAL_ROWS_FILE
    ).read_bytes()
    spool.close()


def test_a_spool_refuses_a_non_finite_value_as_it_is_added(tmp_path: Path) -> None:
    spool = TrialRowSpool("review")
    spool.add({"trial": 0})
    with pytest.raises(InputError, match=r"review/1"):
        spool.add({"trial": 1, "latency_s": math.nan})
    spool.close()


def test_rows_alike_but_for_their_trial_are_written_as_each_row_would_be(tmp_path: Path) -> None:
    row = {"trial": 0, "case_id": "c-1", "outcome": "permit", "latency_s": None, "note": "é"}
    alike = TrialRowSpool("review")
    alike.add_trials(row, 12)
    # A row holding the marker's digits elsewhere is still written right (encoded row by row).
    marked = {**row, "note": str(7**40 + 1)}
    alike.add_trials(marked, 2)
    each = TrialRowSpool("review")
    for trial in range(12):
        each.add({**row, "trial": trial})
    for trial in range(2):
        each.add({**marked, "trial": trial})
    assert alike.count == each.count == 14
    assert b"".join(alike.chunks()) == b"".join(each.chunks())
    alike.close()
    each.close()
