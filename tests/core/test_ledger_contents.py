"""Ledger format 2: message contents stored once by digest, verified, read back exactly."""

from __future__ import annotations

import json
import sqlite3
import zlib
from pathlib import Path

import pytest
from tests.support.echo_track import two_candidate_spec, write_corpus
from tests.support.openai_server import OpenAIServer

from trustbench.core import _ledger as ledger_module
from trustbench.core import build_manifest, read_ledger, run_experiment, verify_run, write_manifest
from trustbench.core._ledger import Ledger, verify_chain
from trustbench.core._ledger_contents import FORMAT_1, FORMAT_2, content_problems
from trustbench.errors import CheckFailed

ANCHOR = "0" * 64
PROMPT = "# Review prompt\n" + "Decide whether the change may proceed. " * 100


def _request(trial: int) -> str:
    user = json.dumps({"evaluation_id": f"rtb-{trial:032x}", "proposal": "x" * 300})
    body = {"messages": [{"role": "system", "content": PROMPT}, {"role": "user", "content": user}]}
    return json.dumps(body | {"model": "m", "temperature": 0.5}, separators=(",", ":"))


def _write(run_dir: Path, trials: int) -> list[str]:
    ledger = Ledger.open(run_dir, ANCHOR)
    requests = [_request(trial) for trial in range(trials)]
    for trial, request in enumerate(requests):
        attempt = {"trial_id": f"c/x/{trial}", "execution": 1, "request": request}
        ledger.append_many([("attempts", attempt), ("trials", {"trial_id": f"c/x/{trial}"})])
    ledger.anchor(force=True)
    ledger.close()
    return requests


def _db(run_dir: Path) -> sqlite3.Connection:
    return sqlite3.connect(run_dir / "ledger.sqlite", isolation_level=None)


def test_a_repeated_prompt_is_stored_once_and_every_request_reads_back_as_sent(
    tmp_path: Path,
) -> None:
    requests = _write(tmp_path, 3)
    db = _db(tmp_path)
    # One shared prompt plus one user message per trial; the attempt rows hold digests only.
    assert db.execute("SELECT COUNT(*) FROM contents").fetchone()[0] == 4
    assert all(PROMPT not in row[0] for row in db.execute("SELECT request FROM attempts"))
    assert verify_chain(db, ANCHOR) == [] and content_problems(db) == []
    contents = read_ledger(tmp_path)
    assert contents.experiment["ledger_format"] == FORMAT_2
    assert [a["request"] for a in contents.attempts] == [json.loads(r) for r in requests]


def test_an_edited_content_body_is_caught_although_the_chain_is_intact(tmp_path: Path) -> None:
    _write(tmp_path, 2)
    db = _db(tmp_path)
    digest = db.execute("SELECT digest FROM contents LIMIT 1").fetchone()[0]
    forged = zlib.compress(PROMPT.replace("Decide", "Permit").encode())
    db.execute("UPDATE contents SET body = ? WHERE digest = ?", (forged, digest))
    assert verify_chain(db, ANCHOR) == []
    assert content_problems(db) == [
        f"contents {digest}: the stored body does not match its digest (edited?)"
    ]


def test_a_deleted_content_body_is_caught_and_reading_refuses(tmp_path: Path) -> None:
    _write(tmp_path, 2)
    db = _db(tmp_path)
    db.execute("DELETE FROM contents")
    assert "is missing (deleted?)" in content_problems(db)[0]
    with pytest.raises(CheckFailed, match=r"stored content .* is missing"):
        read_ledger(tmp_path)


def test_contents_of_a_rolled_back_append_are_stored_by_the_next_one(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path, ANCHOR)
    attempt = {"trial_id": "c/x/0", "execution": 1, "request": _request(0)}
    with pytest.raises(TypeError):
        ledger.append_many([("attempts", attempt), ("trials", {"trial_id": object()})])
    ledger.append_many([("attempts", attempt), ("trials", {"trial_id": "c/x/0"})])
    ledger.close()
    assert content_problems(_db(tmp_path)) == []
    assert read_ledger(tmp_path).attempts[0]["request"] == json.loads(_request(0))


def test_a_format_1_ledger_stays_readable_and_resuming_it_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the previous version wrote: full requests inline, format id /1.
    with monkeypatch.context() as patch:
        patch.setattr(ledger_module, "LEDGER_FORMAT", FORMAT_1)
        patch.setattr(ledger_module, "pack_attempt", lambda values, known, new: (values, []))
        requests = _write(tmp_path, 2)
    assert _db(tmp_path).execute("SELECT COUNT(*) FROM contents").fetchone()[0] == 0
    contents = read_ledger(tmp_path)
    assert [a["request"] for a in contents.attempts] == [json.loads(r) for r in requests]
    assert content_problems(_db(tmp_path)) == []
    with pytest.raises(CheckFailed, match=r"format trustbench\.ledger/1; this writes .*ledger/2"):
        Ledger.open(tmp_path, ANCHOR)


def test_verify_of_a_real_run_fails_when_a_stored_prompt_is_edited(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    write_corpus(tmp_path / "corpus", 1)
    case = tmp_path / "corpus" / "cases" / "case-000.json"
    case.write_text(json.dumps({"id": "case-000", "prompt": PROMPT}))
    spec = tmp_path / "exp.toml"
    spec.write_text(two_candidate_spec(openai_server.base_url, trials=2))
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir)
    assert verify_run(run_dir).ok
    db = _db(run_dir)
    # Four attempts send the long prompt; it is stored once.
    assert db.execute("SELECT COUNT(*) FROM contents").fetchone()[0] == 1
    forged = zlib.compress(PROMPT.replace("Decide", "Permit").encode())
    db.execute("UPDATE contents SET body = ?", (forged,))
    db.close()
    problems = verify_run(run_dir).problems
    assert len(problems) == 1 and "does not match its digest" in problems[0]
