from __future__ import annotations

import json
import math
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import invoke
from tests.support.echo_track import two_candidate_spec, write_corpus
from tests.support.openai_server import OpenAIServer

from trustbench.core import (
    build_manifest,
    export_ledger,
    run_experiment,
    verify_run,
    write_manifest,
)
from trustbench.core.ledger._store import TABLE_COLUMNS


@pytest.fixture
def small_run(tmp_path: Path, openai_server: OpenAIServer) -> Path:
    """A finished run: 1 case x 2 candidates x 1 trial (7 ledger rows)."""
    write_corpus(tmp_path / "corpus", 1)
    spec = tmp_path / "exp.toml"
    spec.write_text(two_candidate_spec(openai_server.base_url, trials=1))
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir, preflight=False)  # the fixed 7 rows this module edits (no probes)
    return run_dir


def _one_byte_change(value: Any) -> Any:
    if value is None:
        return 0
    if isinstance(value, int):
        return value ^ 1
    if isinstance(value, float):
        return math.nextafter(value, math.inf)
    middle = len(value) // 2
    return value[:middle] + chr(ord(value[middle]) ^ 1) + value[middle + 1 :] if value else "x"


def _rows(run_dir: Path) -> list[tuple[str, int]]:
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    rows = [(t, i) for t in TABLE_COLUMNS for (i,) in connection.execute(f"SELECT id FROM {t}")]
    connection.close()
    return rows


def test_verify_passes_an_untouched_run(small_run: Path) -> None:
    report = verify_run(small_run)
    assert report.ok and report.rows == 7 and report.finished_trials == 2
    code, output = invoke("verify", str(small_run))
    assert code == 0 and "7 ledger rows chained" in output


def test_verify_catches_a_one_byte_change_in_any_column_of_any_row(
    small_run: Path, tmp_path: Path
) -> None:
    checked = 0
    for table, row_id in _rows(small_run):
        for column in (*TABLE_COLUMNS[table], "row_hash"):
            if column == "id":
                continue
            copy = tmp_path / f"tampered-{checked}"
            shutil.copytree(small_run, copy)
            connection = sqlite3.connect(copy / "ledger.sqlite")
            (value,) = connection.execute(
                f"SELECT {column} FROM {table} WHERE id = ?", (row_id,)
            ).fetchone()
            connection.execute(
                f"UPDATE {table} SET {column} = ? WHERE id = ?", (_one_byte_change(value), row_id)
            )
            connection.commit()
            connection.close()
            report = verify_run(copy)
            assert not report.ok, f"{table}.{column} id {row_id} change not detected"
            if column != "seq":
                assert f"{table} id {row_id}" in report.problems[0], (
                    table,
                    column,
                    report.problems,
                )
            shutil.rmtree(copy)
            checked += 1
    assert checked > 7 * 5


def test_verify_names_a_deleted_row(small_run: Path) -> None:
    connection = sqlite3.connect(small_run / "ledger.sqlite")
    (seq,) = connection.execute("SELECT seq FROM attempts WHERE id = 1").fetchone()
    connection.execute("DELETE FROM attempts WHERE id = 1")
    connection.commit()
    connection.close()
    report = verify_run(small_run)
    assert report.problems[0].startswith(f"row seq {seq} is missing")
    code, message = invoke("verify", str(small_run))
    assert code == 1 and f"row seq {seq} is missing" in message


def test_verify_catches_rows_cut_off_the_end(small_run: Path) -> None:
    connection = sqlite3.connect(small_run / "ledger.sqlite")
    connection.execute("DELETE FROM events WHERE kind = 'run_finished'")
    connection.commit()
    connection.close()
    report = verify_run(small_run)
    assert len(report.problems) == 1
    assert report.problems[0].startswith("rows were cut off the ledger's end")


def test_verify_catches_a_ledger_moved_to_another_manifest(small_run: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(small_run, other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["spec"]["description"] = "another experiment"
    manifest.pop("manifest_sha256")
    from trustbench._canonical import json_sha256

    manifest["manifest_sha256"] = json_sha256(manifest)
    (other / "manifest.json").write_text(json.dumps(manifest))
    report = verify_run(other)
    assert not report.ok
    assert (
        "experiments id 1 (seq 1): the ledger is not anchored at this manifest"
        in report.problems[0]
    )


def test_resume_refuses_a_tampered_ledger(small_run: Path) -> None:
    connection = sqlite3.connect(small_run / "ledger.sqlite")
    connection.execute(
        "UPDATE trials SET status = 'completed', outcome = '\"permit\"' WHERE id = 1"
    )
    connection.commit()
    connection.close()
    code, message = invoke("run", str(small_run), "--quiet")
    assert code == 1 and "refusing to resume: first altered row: trials id 1" in message


def test_export_ledger_writes_every_row_as_one_json_line_in_chain_order(
    small_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "ledger.jsonl"
    code, _ = invoke("export-ledger", str(small_run), "--out", str(out))
    assert code == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["seq"] for line in lines] == list(range(1, 8))
    assert {line["table"] for line in lines} == set(TABLE_COLUMNS)
    trial = next(line for line in lines if line["table"] == "trials")
    assert isinstance(trial["outcome"], dict) and trial["row_hash"]
    assert export_ledger(small_run, tmp_path / "again.jsonl") == 7


def test_a_ledger_killed_before_its_first_row_starts_afresh(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    from trustbench.core.ledger._store import _connect, _create_tables

    write_corpus(tmp_path / "corpus", 1)
    spec = tmp_path / "exp.toml"
    spec.write_text(two_candidate_spec(openai_server.base_url, trials=1))
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    connection = _connect(run_dir / "ledger.sqlite")
    _create_tables(connection)
    connection.close()
    assert run_experiment(run_dir).completed == 2
    assert verify_run(run_dir).ok


def test_utc_now_is_utc_iso_8601_with_microseconds_always_written() -> None:
    import datetime as dt
    import re

    from trustbench.core import utc_now

    before = dt.datetime.now(dt.UTC)
    stamp = utc_now()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", stamp), stamp
    assert before <= dt.datetime.fromisoformat(stamp) <= dt.datetime.now(dt.UTC)
