"""`run` (resume included) refuses every ledger `verify` refuses, before writing anything.

Issue 56: `run` resumed onto ledgers with edited bytes `verify` refused, and onto a ledger whose
tail was cut with `ledger.head` rewritten and the unsigned statement deleted, re-running the cut
trials as if new. The CLI runs as a subprocess, as a user runs it.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.child_env import child_env
from tests.support.cli import ALPHA_KEY, invoke
from tests.support.echo_track import two_candidate_spec, write_corpus
from tests.support.openai_server import OpenAIServer

from trustbench.core import build_manifest, read_ledger, run_experiment, verify_run, write_manifest
from trustbench.errors import CheckFailed

ROOT = Path(__file__).resolve().parents[2]
EDITS = 20
"""Content-changing byte edits (ones `verify` refuses) each checked against `run`."""


@pytest.fixture
def finished_run(tmp_path: Path, openai_server: OpenAIServer) -> Path:
    """A finished run: 2 cases x 2 candidates x 2 trials, against the local test server."""
    write_corpus(tmp_path / "corpus", 2)
    spec = tmp_path / "exp.toml"
    spec.write_text(two_candidate_spec(openai_server.base_url, trials=2))
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir, preflight=False)
    return run_dir


CASES = '["backup_retention-01-permitted", "backup_retention-02-presentation_only"]'
REVIEW_SPEC = f"""
suite = "rtb"
track = "review"
trials_per_case = 3
concurrency = 2
timeout_s = 30.0
order_seed = 7
track_options = {{ cases = {CASES} }}

[corpus]
builtin = "v0.1"

[[candidates]]
name = "reviewer"
kind = "inprocess"
entry = "trustbench.rtb.review.reviewers:chat_responder"
settings = {{ reviewer = "reference-policy" }}
"""
"""6 review trials by the in-process reference reviewer: a track that reports (record.json)."""


@pytest.fixture
def reported_run(tmp_path: Path) -> Path:
    """A finished, reported review run (record.json and the unsigned record.intoto.json)."""
    spec = tmp_path / "review.toml"
    spec.write_text(REVIEW_SPEC)
    run_dir = tmp_path / "reported"
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir)
    assert invoke("report", str(run_dir))[0] == 0
    assert (run_dir / "record.intoto.json").exists()
    return run_dir


def _run_cli(run_dir: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """`trustbench run RUN_DIR --quiet` in a fresh process (with the echo track registered)."""
    env = child_env(run_dir.parent, pythonpath=[ROOT], extra={"TB_TEST_ALPHA_KEY": ALPHA_KEY})
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.trustbench_cli",
            "run",
            str(run_dir),
            "--quiet",
            *options,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _verify_refuses(run_dir: Path) -> bool:
    try:
        return bool(verify_run(run_dir).alterations)
    except CheckFailed:  # not a SQLite file any more
        return True


@pytest.mark.slow
def test_run_refuses_every_byte_edit_verify_refuses_and_leaves_the_ledger_byte_identical(
    finished_run: Path,
) -> None:
    ledger = finished_run / "ledger.sqlite"
    pristine = ledger.read_bytes()
    rng = random.Random(56)
    edits: list[tuple[int, int]] = []
    while len(edits) < EDITS:
        offset, value = rng.randrange(len(pristine)), rng.randrange(256)
        if pristine[offset] == value:
            continue
        edited = bytearray(pristine)
        edited[offset] = value
        ledger.write_bytes(edited)
        if _verify_refuses(finished_run):  # a byte in unused space changes no content
            edits.append((offset, value))
    for offset, value in edits:
        edited = bytearray(pristine)
        edited[offset] = value
        ledger.write_bytes(edited)
        result = _run_cli(finished_run)
        where = f"byte {offset} set to {value}: "
        assert result.returncode == 1, where + result.stdout + result.stderr
        assert "Traceback" not in result.stderr, where + result.stderr
        assert ledger.read_bytes() == edited, where + "run changed the refused ledger"


def _cut_tail(run_dir: Path, trials: int) -> list[str]:
    """Cut the last `trials` trial rows off the ledger's end, as an attacker would: every row
    from the first of them on (their attempts, the sign-off), `ledger.head` rewritten to the
    new last row and the unsigned record statement deleted. Returns the cut trial ids."""
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    cut = connection.execute(
        "SELECT trial_id, seq FROM trials ORDER BY seq DESC LIMIT ?", (trials,)
    ).fetchall()
    first_cut_seq = min(seq for _, seq in cut)
    for table in ("experiments", "trials", "attempts", "events"):
        connection.execute(f"DELETE FROM {table} WHERE seq >= ?", (first_cut_seq,))
    last = max(
        connection.execute(
            f"SELECT seq, row_hash FROM {table} ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        for table in ("experiments", "trials", "attempts", "events")
        if connection.execute(f"SELECT 1 FROM {table}").fetchone()
    )
    connection.commit()
    connection.execute("VACUUM")
    connection.close()
    head_file = run_dir / "ledger.head"
    head = json.loads(head_file.read_text())
    head["seq"], head["row_hash"] = last
    head_file.write_text(json.dumps(head, sort_keys=True) + "\n")
    (run_dir / "record.intoto.json").unlink()
    return sorted(trial_id for trial_id, _ in cut)


@pytest.mark.slow
def test_a_cut_tail_with_a_rewritten_head_is_refused_naming_the_cut_trials_until_rerun_cut(
    reported_run: Path,
) -> None:
    finished_run = reported_run
    cut = _cut_tail(finished_run, 2)
    ledger = finished_run / "ledger.sqlite"
    before = ledger.read_bytes()

    refused = _run_cli(finished_run)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    message = refused.stderr
    assert "refusing to resume: rows were cut off the ledger's end" in message
    assert "the 2 cut trials are (first in seeded order): " in message
    assert all(trial_id in message for trial_id in cut), message
    assert ledger.read_bytes() == before, "the refusal wrote to the ledger"
    assert invoke("verify", str(finished_run))[0] == 1, "verify refuses it too"

    rerun = _run_cli(finished_run, "--rerun-cut")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "6/6 trials finished (4 before this run)" in rerun.stdout
    trial_ids = [t["trial_id"] for t in read_ledger(finished_run).trials]
    assert len(trial_ids) == 6 and set(cut) <= set(trial_ids)
    code, output = invoke("verify", str(finished_run))
    assert code == 0 and "note: 2 trials were run again after finished trials were cut" in output
    assert invoke("report", str(finished_run))[0] == 0
    record = json.loads((finished_run / "record.json").read_text())
    assert record["trials_rerun_after_cut"] == 2


def test_a_finished_run_records_no_trial_rerun_after_a_cut(reported_run: Path) -> None:
    record = json.loads((reported_run / "record.json").read_text())
    assert record["trials_rerun_after_cut"] == 0


def test_ledger_head_counts_the_finished_trials_it_vouches_for(finished_run: Path) -> None:
    head = json.loads((finished_run / "ledger.head").read_text())
    assert head["trials"] == len(read_ledger(finished_run).trials) == 8


# Remembered verifications: `run` skips the per-row checks only for bytes a whole check found
# intact, proven by an HMAC keyed by a secret in the user's cache (`_ledger_integrity`).


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own `$TRUSTBENCH_CACHE` (where verifications are remembered)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("TRUSTBENCH_CACHE", str(folder))
    return folder


def _whole_checks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Count the whole checks (`ledger_problems`) `run` makes from now on."""
    from trustbench.core.ledger import _store as _ledger_integrity

    made: list[Path] = []
    whole_check = _ledger_integrity.ledger_problems

    def counted(connection: sqlite3.Connection, run_dir: Path, manifest_sha256: str) -> list[str]:
        made.append(run_dir)
        return whole_check(connection, run_dir, manifest_sha256)

    monkeypatch.setattr(_ledger_integrity, "ledger_problems", counted)
    return made


def test_resuming_a_finished_run_leaves_its_ledger_byte_identical_and_checks_it_whole_once(
    finished_run: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = finished_run / "ledger.sqlite"
    finished = ledger.read_bytes()
    files = sorted(path.name for path in finished_run.iterdir())
    whole_checks = _whole_checks(monkeypatch)
    for _ in range(3):
        assert invoke("run", str(finished_run), "--quiet")[0] == 0
        assert ledger.read_bytes() == finished, "a resume with nothing to do wrote to the ledger"
    assert len(whole_checks) == 1, "the second and third resumes trusted the remembered check"
    key = cache / "verified-ledgers" / "key"
    assert key.stat().st_mode & 0o777 == 0o600
    assert (cache / "verified-ledgers").stat().st_mode & 0o777 == 0o700
    assert sorted(path.name for path in finished_run.iterdir()) == files, (
        "nothing is remembered inside the run folder"
    )


def test_a_byte_edit_after_a_remembered_verification_is_still_refused(
    finished_run: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = finished_run / "ledger.sqlite"
    assert invoke("run", str(finished_run), "--quiet")[0] == 0  # checked whole, remembered
    pristine = ledger.read_bytes()
    whole_checks = _whole_checks(monkeypatch)
    assert invoke("run", str(finished_run), "--quiet")[0] == 0
    assert whole_checks == [], "the pristine ledger was taken as remembered"
    rng = random.Random(5656)
    refused = 0
    while refused < 5:
        offset, value = rng.randrange(len(pristine)), rng.randrange(256)
        edited = bytearray(pristine)
        edited[offset] = value
        ledger.write_bytes(edited)
        if pristine[offset] == value or not _verify_refuses(finished_run):
            continue  # a byte in unused space changes no content
        code, message = invoke("run", str(finished_run), "--quiet")
        assert code == 1, f"byte {offset} set to {value}: {message}"
        assert ledger.read_bytes() == edited, f"byte {offset}: run changed the refused ledger"
        refused += 1
    ledger.write_bytes(pristine)
    assert invoke("run", str(finished_run), "--quiet")[0] == 0


def _forge(record: Path, manifest_sha256: str, digest: str) -> None:
    """What a forger without the key writes: the record MAC'd with a key of their own."""
    from trustbench.core.ledger._store import _mac

    record.write_bytes(_mac(b"forger's key", manifest_sha256, digest).encode())


def test_a_forged_verification_record_is_not_trusted(
    finished_run: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trustbench.core.ledger._store import ledger_digest

    assert invoke("run", str(finished_run), "--quiet")[0] == 0  # a genuine record exists
    (record,) = [p for p in (cache / "verified-ledgers").iterdir() if p.name != "key"]
    connection = sqlite3.connect(finished_run / "ledger.sqlite")
    connection.execute("UPDATE trials SET outcome = '\"permit\"' WHERE id = 1")
    connection.commit()
    connection.close()
    manifest = json.loads((finished_run / "manifest.json").read_text())["manifest_sha256"]
    digest = ledger_digest(finished_run / "ledger.sqlite")
    assert digest is not None
    _forge(record, manifest, digest)  # in the cache, where the genuine one was
    _forge(finished_run / record.name, manifest, digest)  # and in the run folder
    _forge(finished_run / "ledger.verified", manifest, digest)
    whole_checks = _whole_checks(monkeypatch)
    code, message = invoke("run", str(finished_run), "--quiet")
    assert code == 1 and "refusing to resume: first altered row: trials id 1" in message
    assert whole_checks == [finished_run]


def test_a_verification_key_others_can_read_vouches_for_nothing(
    finished_run: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert invoke("run", str(finished_run), "--quiet")[0] == 0
    (cache / "verified-ledgers" / "key").chmod(0o644)
    whole_checks = _whole_checks(monkeypatch)
    assert invoke("run", str(finished_run), "--quiet")[0] == 0
    assert whole_checks == [finished_run]


def test_a_write_ahead_log_beside_a_remembered_ledger_means_a_whole_check(
    finished_run: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert invoke("run", str(finished_run), "--quiet")[0] == 0
    # SQLite reads a -wal file's frames as part of the database: not in the file's digest.
    (finished_run / "ledger.sqlite-wal").write_bytes(b"\0" * 4096)
    whole_checks = _whole_checks(monkeypatch)
    assert invoke("run", str(finished_run), "--quiet")[0] == 0
    assert whole_checks == [finished_run]
