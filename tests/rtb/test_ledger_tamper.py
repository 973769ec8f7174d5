"""Tampering with a reported run's ledger, as an attacker would: every change is refused.

Black-box where it matters: the edits are made with SQLite or on the file's bytes, never through
trustbench, and judged by `verify`, `report` and `run`.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from tests.rtb.test_review_track import PERMIT_ALL, POLICY, run_spec, spec_text
from tests.support.cli import invoke

from trustbench.core import report_run, verify_run
from trustbench.errors import TrustbenchError

TABLES = ("experiments", "trials", "attempts", "events")


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = run_spec(tmp_path_factory.mktemp("tamper"), spec_text(POLICY + PERMIT_ALL))
    report_run(run_dir)
    return run_dir


def _copy(reported: Path, tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(reported, run_dir)
    return run_dir


def _observed(path: Path) -> object:
    """What SQLite shows of a file: its integrity verdict and full dump (or the error)."""
    connection = sqlite3.connect(path)
    try:
        return connection.execute("PRAGMA integrity_check").fetchall(), list(connection.iterdump())
    except sqlite3.DatabaseError as error:
        return str(error)
    finally:
        connection.close()


def _detected(run_dir: Path) -> bool:
    try:
        return not verify_run(run_dir).ok
    except (TrustbenchError, sqlite3.DatabaseError):
        return True


def test_every_one_byte_edit_that_changes_the_ledger_is_detected(
    reported: Path, tmp_path: Path
) -> None:
    # Issue 30's probe: 110 random one-byte edits of ledger.sqlite (seeded). Edits of bytes
    # SQLite never reads (free space inside a page) change nothing and are drawn again.
    run_dir = _copy(reported, tmp_path)
    ledger = run_dir / "ledger.sqlite"
    original = ledger.read_bytes()
    unchanged = _observed(ledger)
    rng = random.Random(30)
    edits, missed, tries = 0, [], 0
    while edits < 110:
        tries += 1
        assert tries < 2000, "too few edits change the file"
        data = bytearray(original)
        position = rng.randrange(len(data))
        data[position] = (data[position] + rng.randrange(1, 256)) % 256
        ledger.write_bytes(bytes(data))
        if _observed(ledger) == unchanged:
            continue
        edits += 1
        if not _detected(run_dir):
            missed.append(position)
    assert missed == []


def test_digest_edited_in_the_contents_table_is_detected(reported: Path, tmp_path: Path) -> None:
    run_dir = _copy(reported, tmp_path)
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    (digest,) = connection.execute("SELECT digest FROM contents NOT INDEXED LIMIT 1").fetchone()
    connection.close()
    data = (run_dir / "ledger.sqlite").read_bytes()
    forged = ("0" if digest[0] != "0" else "1") + digest[1:]
    # The digest is stored in the table, in its unique index and in the attempts that refer to
    # it; a lookup by digest goes through the index, so the table's copy was never read.
    assert data.count(digest.encode()) >= 2
    start = 0
    while (at := data.find(digest.encode(), start)) >= 0:
        edited = data[:at] + forged.encode() + data[at + len(digest) :]
        (run_dir / "ledger.sqlite").write_bytes(edited)
        assert _detected(run_dir), at
        start = at + 1


@pytest.mark.parametrize(
    "ddl",
    [
        "CREATE TABLE notes (x)",
        "CREATE VIEW v AS SELECT * FROM trials",
        "CREATE TRIGGER t AFTER INSERT ON trials BEGIN UPDATE trials SET outcome = NULL; END",
    ],
    ids=["table", "view", "trigger"],
)
def test_anything_added_to_the_ledger_file_is_refused_by_verify_report_and_run(
    reported: Path, tmp_path: Path, ddl: str
) -> None:
    run_dir = _copy(reported, tmp_path)
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    connection.execute(ddl)
    connection.commit()
    connection.close()
    for command in (("verify",), ("report",), ("run", "--quiet")):
        code, message = invoke(command[0], str(run_dir), *command[1:])
        assert code == 1 and "holds an unknown" in message, (command, message)


def _last_seq(connection: sqlite3.Connection) -> int:
    return max(connection.execute(f"SELECT MAX(seq) FROM {t}").fetchone()[0] for t in TABLES)


def test_row_inserted_after_the_last_head_is_named_inserted(reported: Path, tmp_path: Path) -> None:
    run_dir = _copy(reported, tmp_path)
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    row = list(connection.execute("SELECT * FROM trials ORDER BY seq DESC LIMIT 1").fetchone())
    row[0], row[1], row[2] = row[0] + 1, _last_seq(connection) + 1, "forged-trial"
    connection.execute(f"INSERT INTO trials VALUES ({', '.join('?' * len(row))})", row)
    connection.commit()
    connection.close()
    code, message = invoke("verify", str(run_dir))
    assert code == 1 and "was inserted" in message and "altered" not in message


def test_row_inserted_under_a_used_seq_is_named_inserted(reported: Path, tmp_path: Path) -> None:
    run_dir = _copy(reported, tmp_path)
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    row = list(connection.execute("SELECT * FROM trials ORDER BY seq LIMIT 1").fetchone())
    row[0], row[1], row[2] = row[0] + 100, 3, "forged-trial"
    connection.execute(f"INSERT INTO trials VALUES ({', '.join('?' * len(row))})", row)
    connection.commit()
    connection.close()
    code, message = invoke("verify", str(run_dir))
    assert code == 1 and "inserted" in message


def test_tail_cut_with_rewritten_head_is_refused_by_verify_report_and_run(
    reported: Path, tmp_path: Path
) -> None:
    # Cut the last trials and everything after them, then make ledger.head agree: the chain
    # and the head are consistent; only the record statement remembers the longer ledger.
    run_dir = _copy(reported, tmp_path)
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    cut = connection.execute("SELECT seq FROM trials ORDER BY seq DESC LIMIT 3").fetchall()[-1][0]
    for table in TABLES[1:]:
        connection.execute(f"DELETE FROM {table} WHERE seq >= ?", (cut,))
    connection.commit()
    seq, row_hash = max(
        (connection.execute(f"SELECT seq, row_hash FROM {t} ORDER BY seq DESC").fetchone())
        for t in TABLES
    )
    connection.close()
    head = json.loads((run_dir / "ledger.head").read_text())
    head.update(seq=seq, row_hash=row_hash)
    (run_dir / "ledger.head").write_text(json.dumps(head))
    trials_before = (
        sqlite3.connect(run_dir / "ledger.sqlite").execute("SELECT COUNT(*) FROM trials").fetchone()
    )
    for command in (("verify",), ("report",), ("run", "--quiet")):
        code, message = invoke(command[0], str(run_dir), *command[1:])
        assert code == 1 and "disagrees with record.intoto.json" in message, (command, message)
    # Nothing was re-run: the cut trials were not rolled again.
    assert (
        sqlite3.connect(run_dir / "ledger.sqlite").execute("SELECT COUNT(*) FROM trials").fetchone()
        == trials_before
    )
