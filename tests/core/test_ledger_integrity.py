"""Ledger integrity beyond the chain: recorded head, sign-offs, inputs, broken files."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from tests.support.cli import invoke
from tests.support.echo_track import two_candidate_spec, write_corpus
from tests.support.openai_server import OpenAIServer, stall

from trustbench.core import build_manifest, read_ledger, run_experiment, verify_run, write_manifest
from trustbench.core.ledger._chain import row_hash, verify_chain
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


def _sql(run_dir: Path, *statements: str) -> None:
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    for statement in statements:
        connection.execute(statement)
    connection.commit()
    connection.close()


def _rehash_everything(run_dir: Path) -> None:
    """What a forger with the SQLite file alone can do: recompute every row hash in order."""
    manifest_sha = json.loads((run_dir / "manifest.json").read_text())["manifest_sha256"]
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    rows = []
    for table, columns in TABLE_COLUMNS.items():
        for values in connection.execute(f"SELECT {', '.join(columns)} FROM {table}"):
            rows.append((table, dict(zip(columns, values, strict=True))))
    head = manifest_sha
    for table, row in sorted(rows, key=lambda item: item[1]["seq"]):
        head = row_hash(head, table, row)
        connection.execute(f"UPDATE {table} SET row_hash = ? WHERE id = ?", (head, row["id"]))
    connection.commit()
    assert verify_chain(connection, manifest_sha) == [], "the forged chain is self-consistent"
    connection.close()


def test_rows_cut_off_a_finished_run_fail_verify_report_and_resume_without_a_reroll(
    small_run: Path,
) -> None:
    _sql(
        small_run,
        "DELETE FROM events WHERE kind = 'run_finished'",
        "DELETE FROM trials WHERE id = 2",
        "DELETE FROM attempts WHERE id = 2",
    )
    assert verify_run(small_run).problems[0].startswith("rows were cut off the ledger's end")
    code, message = invoke("report", str(small_run))
    assert code == 1 and "refusing to report an altered run: rows were cut off" in message
    code, message = invoke("run", str(small_run), "--quiet")
    assert code == 1 and "refusing to resume: rows were cut off" in message
    assert len(read_ledger(small_run).trials) == 1, "the cut trial was not silently re-run"
    assert not verify_run(small_run).ok


def test_a_chain_rehashed_after_an_edit_is_caught_by_the_recorded_head(small_run: Path) -> None:
    _sql(small_run, "UPDATE trials SET outcome = '\"permit\"' WHERE id = 1")
    _rehash_everything(small_run)
    problems = verify_run(small_run).problems
    assert problems[0].startswith("the ledger was rewritten: row seq 7")
    code, message = invoke("report", str(small_run))
    assert code == 1 and "refusing to report an altered run" in message


def _insert_shifting_the_rest(run_dir: Path, *, chained: bool) -> None:
    """Slip a copy of trial 1 in at seq 4, renumbering every later row (+1) without re-chaining.

    `chained`: the forged row chains onto seq 3; otherwise it carries trial 1's stored hash.
    """
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    for table in TABLE_COLUMNS:
        connection.execute(f"UPDATE {table} SET seq = -seq - 1 WHERE seq >= 4")
        connection.execute(f"UPDATE {table} SET seq = -seq WHERE seq < 0")
    columns = TABLE_COLUMNS["trials"]
    values = connection.execute(f"SELECT {', '.join(columns)}, row_hash FROM trials WHERE id = 1")
    *found, stored = values.fetchone()
    row = {**dict(zip(columns, found, strict=True)), "id": 100, "seq": 4, "trial_id": "forged"}
    before = next(
        hashed
        for table in TABLE_COLUMNS
        for (hashed,) in connection.execute(f"SELECT row_hash FROM {table} WHERE seq = 3")
    )
    hashed = row_hash(before, "trials", row) if chained else stored
    marks = ", ".join("?" * (len(row) + 1))
    connection.execute(
        f"INSERT INTO trials ({', '.join(row)}, row_hash) VALUES ({marks})",
        [*row.values(), hashed],
    )
    connection.commit()
    connection.close()


@pytest.mark.parametrize("chained", [True, False])
def test_a_row_inserted_mid_chain_with_the_later_rows_renumbered_is_named_inserted(
    small_run: Path, chained: bool
) -> None:
    _insert_shifting_the_rest(small_run, chained=chained)
    problems = verify_run(small_run).problems
    assert problems[0].startswith("trials id 100 (seq 4) was inserted: the rows after it were")


@pytest.mark.parametrize(
    "value", ["x'00ff'", str(2**60), "9e999"], ids=["blob", "unsafe-integer", "infinity"]
)
def test_a_row_holding_a_value_no_ledger_row_holds_is_named_altered(
    small_run: Path, value: str
) -> None:
    _sql(small_run, f"UPDATE trials SET duration_s = {value} WHERE id = 1")
    problems = verify_run(small_run).problems
    assert any("trials id 1" in p and "no ledger row can hold" in p for p in problems), problems
    code, message = invoke("report", str(small_run))
    assert code == 1 and "refusing to report an altered run" in message


def test_a_deleted_ledger_head_is_reported_as_unverifiable(small_run: Path) -> None:
    (small_run / "ledger.head").unlink()
    assert verify_run(small_run).problems[0].startswith("ledger.head is missing")


def test_run_finished_signs_off_the_chain_head_and_the_finished_trial_count(
    small_run: Path,
) -> None:
    ledger = read_ledger(small_run)
    sign_off = ledger.events[-1]
    assert sign_off["kind"] == "run_finished" and sign_off["data"]["finished"] == 2
    connection = sqlite3.connect(small_run / "ledger.sqlite")
    before = [
        found[0]
        for table in TABLE_COLUMNS
        if (
            found := connection.execute(
                f"SELECT row_hash FROM {table} WHERE seq = ?", (sign_off["seq"] - 1,)
            ).fetchone()
        )
    ]
    connection.close()
    assert sign_off["data"]["head"] == before[0]
    head = json.loads((small_run / "ledger.head").read_text())
    assert (head["seq"], head["row_hash"]) == (sign_off["seq"], sign_off["row_hash"])


def test_a_sign_off_miscounting_the_trials_is_caught_even_in_a_rehashed_chain(
    small_run: Path,
) -> None:
    _sql(
        small_run,
        "UPDATE events SET data = replace(data, '\"finished\":2', '\"finished\":3') "
        "WHERE kind = 'run_finished'",
    )
    _rehash_everything(small_run)
    (small_run / "ledger.head").unlink()  # the forger removes the anchor too
    problems = verify_run(small_run).problems
    assert problems[0].startswith("ledger.head is missing")
    assert any("sign-off counts 3 finished trials" in p for p in problems)


def test_verify_rehashes_the_corpus_against_the_manifest(small_run: Path) -> None:
    case = small_run.parent / "corpus" / "cases" / "case-000.json"
    case.write_text(case.read_text().replace("}", ', "edited": true}'))
    problems = verify_run(small_run).problems
    assert len(problems) == 1
    assert problems[0].startswith("frozen inputs: cases/case-000.json: corpus file")
    assert "changed after freeze" in problems[0]
    code, message = invoke("verify", str(small_run))
    assert code == 1 and "changed after freeze" in message


@pytest.mark.parametrize(
    ("content", "expected"),
    [(b"", "0 bytes"), (b"\x00garbage, not SQLite\xff" * 400, "corrupted or not a SQLite")],
)
@pytest.mark.parametrize("command", ["run", "verify", "report"])
def test_an_empty_or_corrupted_ledger_is_a_one_line_error_never_a_fresh_start(
    small_run: Path, content: bytes, expected: str, command: str
) -> None:
    (small_run / "ledger.sqlite").write_bytes(content)
    for leftover in ("ledger.sqlite-wal", "ledger.sqlite-shm"):
        (small_run / leftover).unlink(missing_ok=True)
    args = [command, str(small_run)] + (["--quiet"] if command == "run" else [])
    code, message = invoke(*args)
    assert code == 1 and expected in message and "\n" not in message.strip()
    assert (small_run / "ledger.sqlite").read_bytes() == content, "nothing was started afresh"


def test_an_attempt_cut_short_by_the_trial_timeout_is_recorded(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    write_corpus(tmp_path / "corpus", 1)
    openai_server.on("case-000", stall(1.5))
    spec = tmp_path / "exp.toml"
    spec.write_text(
        two_candidate_spec(openai_server.base_url, trials=1, extra="trial_timeout_s = 0.3")
    )
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir)
    ledger = read_ledger(run_dir)
    timed_out = [t for t in ledger.trials if t["error_class"] == "trial_timeout"]
    assert timed_out, "the stalled call timed the trial out"
    for trial in timed_out:
        attempts = ledger.attempts_of(trial["trial_id"])
        assert trial["attempts"] == len(attempts) >= 1
        assert attempts[-1]["error_class"] == "trial_timeout"
        assert attempts[-1]["request_digest"] and attempts[-1]["raw_response"] is None
    assert verify_run(run_dir).ok


def test_candidate_resample_is_refused_for_a_track_that_never_resamples(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    write_corpus(tmp_path / "corpus", 1)
    spec = tmp_path / "exp.toml"
    text = two_candidate_spec(openai_server.base_url, trials=1)
    spec.write_text(
        text.replace("backoff_max_s = 0.05", "backoff_max_s = 0.05\ncandidate_resample = 2")
    )
    code, message = invoke("freeze", str(spec), "--out", str(tmp_path / "run"))
    assert code == 2 and "#/retry/candidate_resample" in message and "never re-samples" in message
