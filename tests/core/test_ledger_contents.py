"""Ledger format 3: texts stored once by digest, against bases, verified, read back exactly."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import zlib
from pathlib import Path

import pytest
from tests.support.echo_track import two_candidate_spec, write_corpus
from tests.support.openai_server import OpenAIServer

from trustbench.core import build_manifest, read_ledger, run_experiment, verify_run, write_manifest
from trustbench.core.ledger import _store as ledger_module
from trustbench.core.ledger._chain import verify_chain
from trustbench.core.ledger._contents import (
    FORMAT_1,
    FORMAT_2,
    FORMAT_3,
    _Batch,
    content_problems,
)
from trustbench.core.ledger._store import Ledger
from trustbench.errors import CheckFailed

ANCHOR = "0" * 64
PROMPT = "# Review prompt\n" + "Decide whether the change may proceed. " * 100
PROPOSAL = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(20))
"""The same in every trial and hard to compress alone (1,280 hex digits)."""


def _request(trial: int) -> str:
    user = json.dumps({"evaluation_id": f"rtb-{trial:032x}", "proposal": PROPOSAL})
    body = {"messages": [{"role": "system", "content": PROMPT}, {"role": "user", "content": user}]}
    return json.dumps(body | {"model": "m", "temperature": 0.5}, separators=(",", ":"))


def _reply(trial: int) -> str:
    return json.dumps({"choices": [{"message": {"content": f"rtb-{trial:032x} " + "ok " * 200}}]})


def _write(run_dir: Path, trials: int) -> list[str]:
    ledger = Ledger.open(run_dir, ANCHOR)
    requests = [_request(trial) for trial in range(trials)]
    for trial, request in enumerate(requests):
        attempt = {
            "trial_id": f"c/x/{trial}",
            "execution": 1,
            "request": request,
            "raw_response": _reply(trial),
        }
        ledger.append_many(
            [("attempts", attempt), ("trials", {"trial_id": f"c/x/{trial}"})], family="c"
        )
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
    # One shared prompt, one user message and one reply per trial; the rows hold digests only.
    assert db.execute("SELECT COUNT(*) FROM contents").fetchone()[0] == 7
    assert all(PROMPT not in row[0] for row in db.execute("SELECT request FROM attempts"))
    assert verify_chain(db, ANCHOR) == [] and content_problems(db) == []
    contents = read_ledger(tmp_path)
    assert contents.experiment["ledger_format"] == FORMAT_3
    assert [a["request"] for a in contents.attempts] == [json.loads(r) for r in requests]
    assert [a["raw_response"] for a in contents.attempts] == [_reply(t) for t in range(3)]


def test_alike_texts_of_one_family_are_compressed_against_the_first(tmp_path: Path) -> None:
    _write(tmp_path, 3)
    rows = _db(tmp_path).execute("SELECT digest, body, base FROM contents ORDER BY rowid")
    bodies = {digest: (len(body), base) for digest, body, base in rows}
    user = [hashlib.sha256(json.loads(_request(t))["messages"][1]["content"].encode()).hexdigest()
            for t in range(3)]  # fmt: skip
    # The first user message is stored alone; the next two differ only in their evaluation id
    # and are stored as a few bytes against it.
    assert bodies[user[0]][1] is None
    assert [bodies[d][1] for d in user[1:]] == [user[0], user[0]]
    assert all(bodies[d][0] < bodies[user[0]][0] / 4 for d in user[1:])


def test_an_edited_base_is_caught_by_every_text_compressed_against_it(tmp_path: Path) -> None:
    _write(tmp_path, 3)
    db = _db(tmp_path)
    base = db.execute("SELECT base FROM contents WHERE base IS NOT NULL").fetchone()[0]
    db.execute("UPDATE contents SET body = ? WHERE digest = ?", (zlib.compress(b"{}"), base))
    assert "does not match its digest" in content_problems(db)[0]


def test_bases_that_form_a_cycle_are_a_problem_not_a_hang(tmp_path: Path) -> None:
    _write(tmp_path, 2)
    db = _db(tmp_path)
    first, second = (row[0] for row in db.execute("SELECT digest FROM contents LIMIT 2"))
    db.execute("UPDATE contents SET base = ? WHERE digest = ?", (second, first))
    db.execute("UPDATE contents SET base = ? WHERE digest = ?", (first, second))
    assert "does not match its digest" in content_problems(db)[0]
    with pytest.raises(CheckFailed, match=r"nest deeper|cannot be decompressed"):
        read_ledger(tmp_path)


def test_an_edited_content_body_is_caught_although_the_chain_is_intact(tmp_path: Path) -> None:
    _write(tmp_path, 2)
    db = _db(tmp_path)
    digest = hashlib.sha256(PROMPT.encode()).hexdigest()
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
    # What the first version wrote: full requests inline, format id /1.
    with monkeypatch.context() as patch:
        patch.setattr(ledger_module, "LEDGER_FORMAT", FORMAT_1)
        patch.setattr(
            _Batch, "pack_attempt", lambda self, values, family, request=None: (values, [])
        )
        requests = _write(tmp_path, 2)
    assert _db(tmp_path).execute("SELECT COUNT(*) FROM contents").fetchone()[0] == 0
    contents = read_ledger(tmp_path)
    assert [a["request"] for a in contents.attempts] == [json.loads(r) for r in requests]
    assert content_problems(_db(tmp_path)) == []
    with pytest.raises(CheckFailed, match=r"format trustbench\.ledger/1; this writes .*ledger/3"):
        Ledger.open(tmp_path, ANCHOR)


def test_a_format_2_ledger_stays_readable_and_resuming_it_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What format 2 wrote: request contents by digest in a two-column table, responses inline.
    pack = _Batch.pack_attempt

    def format_2(
        self: _Batch, values: dict, family: str | None, request: object = None
    ) -> tuple[dict, list]:
        packed, inserts = pack(self, {**values, "raw_response": None}, None)
        old_insert = "INSERT OR IGNORE INTO contents (digest, body) VALUES (?, ?)"
        statements = [(old_insert, (c.digest, zlib.compress(c.data))) for c in inserts]
        return {**packed, "raw_response": values.get("raw_response")}, statements

    with monkeypatch.context() as patch:
        patch.setattr(ledger_module, "LEDGER_FORMAT", FORMAT_2)
        patch.setattr(
            ledger_module,
            "CONTENTS_DDL",
            "CREATE TABLE IF NOT EXISTS contents (digest UNIQUE NOT NULL, body NOT NULL)",
        )
        patch.setattr(_Batch, "pack_attempt", format_2)
        requests = _write(tmp_path, 2)
    contents = read_ledger(tmp_path)
    assert [a["request"] for a in contents.attempts] == [json.loads(r) for r in requests]
    assert [a["raw_response"] for a in contents.attempts] == [_reply(t) for t in range(2)]
    assert content_problems(_db(tmp_path)) == []
    with pytest.raises(CheckFailed, match=r"format trustbench\.ledger/2; this writes .*ledger/3"):
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
    digest = hashlib.sha256(PROMPT.encode()).hexdigest()
    assert db.execute("SELECT COUNT(*) FROM contents WHERE digest = ?", (digest,)).fetchone() == (
        1,
    )
    forged = zlib.compress(PROMPT.replace("Decide", "Permit").encode())
    db.execute("UPDATE contents SET body = ? WHERE digest = ?", (forged, digest))
    db.close()
    problems = verify_run(run_dir).problems
    assert len(problems) == 1 and "does not match its digest" in problems[0]


_BODIES = [
    json.loads(_request(7)),
    {"messages": ({"role": "system", "content": PROMPT}, {"role": "user", "content": "hi"}),
     "model": "m", "temperature": 0.0, "max_tokens": 10},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}, "odd"]},
    {"messages": "not a list", "model": "m"},
    {"prompt": PROMPT},
    [PROMPT, 1.5],
]  # fmt: skip


@pytest.mark.parametrize("body", _BODIES)
def test_an_attempt_packed_from_its_body_equals_one_packed_from_its_text(body: object) -> None:
    from trustbench._canonical import canonical_json
    from trustbench.core.ledger._contents import ContentStore

    text = canonical_json(body).decode()
    values = {"trial_id": "c/x/0", "request": text, "raw_response": _reply(0)}
    from_text = ContentStore().begin().pack_attempt(values, "c")
    from_body = ContentStore().begin().pack_attempt(values, "c", body)
    assert from_body == from_text


def test_the_first_missing_reference_is_named_in_attempt_order_across_lookup_batches(
    tmp_path: Path,
) -> None:
    # 300 attempts of 3 references each span several batched lookups (`_REFERENCE_BATCH`).
    _write(tmp_path, 300)
    db = _db(tmp_path)
    late, early = 250, 140
    for attempt_id in (late, early):
        db.execute(
            "UPDATE attempts SET raw_response = ? WHERE id = ?", (f"gone{attempt_id}", attempt_id)
        )
    assert content_problems(db) == [
        f"attempts id {early}: its content gone{early} is missing (deleted?)"
    ]


def test_a_missing_reference_before_an_unpacked_request_in_one_batch_is_named_first(
    tmp_path: Path,
) -> None:
    _write(tmp_path, 5)
    db = _db(tmp_path)
    db.execute("UPDATE attempts SET raw_response = 'gone' WHERE id = 2")
    db.execute("UPDATE attempts SET request = '[1]' WHERE id = 4")
    assert content_problems(db) == ["attempts id 2: its content gone is missing (deleted?)"]
    db.execute("UPDATE attempts SET raw_response = NULL WHERE id = 2")
    assert content_problems(db) == ["attempts id 4: its request is not a packed request"]


@pytest.mark.parametrize(("ref", "named"), [("null", "None"), ("5", "5"), ('"gone"', "gone")])
def test_a_reference_that_is_no_stored_digest_is_missing_whatever_its_json_type(
    tmp_path: Path, ref: str, named: str
) -> None:
    # A null reference was once taken for "nothing missing".
    _write(tmp_path, 3)
    db = _db(tmp_path)
    db.execute(
        "UPDATE attempts SET request = ? WHERE id = 2",
        (f'{{"refs":{{"0":{ref}}},"request":null}}',),
    )
    assert content_problems(db) == [f"attempts id 2: its content {named} is missing (deleted?)"]


def test_a_request_json_loads_accepts_is_read_as_json_loads_reads_it(tmp_path: Path) -> None:
    # Surrounding whitespace takes `json.loads` itself (the fast parse needs the text exact).
    _write(tmp_path, 2)
    db = _db(tmp_path)
    db.execute("UPDATE attempts SET request = ' ' || request || '\n' WHERE id = 1")
    assert content_problems(db) == []
    db.execute("UPDATE attempts SET request = request || ' x' WHERE id = 2")
    assert content_problems(db) == ["attempts id 2: its request is not a packed request"]
