"""The signed record: `record.intoto.json` beside `record.json`, checked by `verify --record`."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from tests.rtb.test_review_track import PERMIT_ALL, POLICY, run_spec, spec_text
from tests.support.cli import invoke

from trustbench.core import report_run
from trustbench.core._attestation import KEY_ENV, STATEMENT_FILE
from trustbench.core._export import export_ledger

KEY = "test-record-key-0123456789abcdef"


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reported reviewer run (reference policy and always-permit, K=1), unsigned."""
    tmp_path = tmp_path_factory.mktemp("attest")
    run_dir = run_spec(tmp_path, spec_text(POLICY + PERMIT_ALL))
    report_run(run_dir)
    return run_dir


def _copy(reported: Path, tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(reported, run_dir)
    return run_dir


def test_unsigned_statement_binds_record_report_manifest_and_ledger_head(
    reported: Path, tmp_path: Path
) -> None:
    statement = json.loads((reported / STATEMENT_FILE).read_text())
    record = json.loads((reported / "record.json").read_text())
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert [s["name"] for s in statement["subject"]] == ["record.json", "report.html"]
    predicate = statement["predicate"]
    assert predicate["manifest_sha256"] == record["manifest_sha256"]
    # The head, read independently: the last row of the exported chain.
    export_ledger(reported, tmp_path / "rows.jsonl")
    rows = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert predicate["ledger_head"]["row_hash"] == json.loads(rows[-1])["row_hash"]
    assert predicate["ledger_head"]["rows"] == len(rows)
    assert predicate["finished_trials"] == record["finished_trials"] == 24
    code, output = invoke("verify", str(reported), "--record")
    assert code == 0 and "UNSIGNED" in output


def test_edited_record_fails_verify_record_naming_the_file(reported: Path, tmp_path: Path) -> None:
    run_dir = _copy(reported, tmp_path)
    record = json.loads((run_dir / "record.json").read_text())
    record["gates"] = []
    (run_dir / "record.json").write_text(json.dumps(record))
    code, message = invoke("verify", str(run_dir), "--record")
    assert code == 1 and "record.json differs from the statement" in message


def test_rewritten_unsigned_statement_is_caught_by_recomputed_ledger_head(
    reported: Path, tmp_path: Path
) -> None:
    # The cheap forgery: claim a different ledger head (e.g. a record graded from another run).
    run_dir = _copy(reported, tmp_path)
    statement = json.loads((run_dir / STATEMENT_FILE).read_text())
    statement["predicate"]["ledger_head"]["row_hash"] = "0" * 64
    (run_dir / STATEMENT_FILE).write_text(json.dumps(statement))
    code, message = invoke("verify", str(run_dir), "--record")
    assert code == 1 and "predicate.ledger_head differs" in message


def test_missing_statement_fails_verify_record(reported: Path, tmp_path: Path) -> None:
    run_dir = _copy(reported, tmp_path)
    (run_dir / STATEMENT_FILE).unlink()
    code, message = invoke("verify", str(run_dir), "--record")
    assert code == 1 and "record.intoto.json is missing" in message


def test_keyed_report_writes_dsse_envelope_whose_mac_verifies_only_with_the_key(
    reported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = _copy(reported, tmp_path)
    monkeypatch.setenv(KEY_ENV, KEY)
    report_run(run_dir)
    envelope = json.loads((run_dir / STATEMENT_FILE).read_text())
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert envelope["signatures"][0]["sig"]
    payload = json.loads(base64.b64decode(envelope["payload"]))
    assert payload["predicateType"].startswith("https://trustbench.dev/")
    code, output = invoke("verify", str(run_dir), "--record")
    assert code == 0 and "signature valid" in output

    monkeypatch.setenv(KEY_ENV, "another-key-0123456789abcdef")
    code, message = invoke("verify", str(run_dir), "--record")
    assert code == 1 and "signature does not match" in message
    monkeypatch.delenv(KEY_ENV)
    code, message = invoke("verify", str(run_dir), "--record")
    assert code == 1 and "cannot be checked" in message


def test_forged_payload_in_signed_envelope_fails_the_mac(
    reported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = _copy(reported, tmp_path)
    monkeypatch.setenv(KEY_ENV, KEY)
    report_run(run_dir)
    record = json.loads((run_dir / "record.json").read_text())
    record["gates"] = []
    (run_dir / "record.json").write_text(json.dumps(record))
    envelope = json.loads((run_dir / STATEMENT_FILE).read_text())
    payload = json.loads(base64.b64decode(envelope["payload"]))
    payload["subject"][0]["digest"]["sha256"] = hashlib.sha256(
        (run_dir / "record.json").read_bytes()
    ).hexdigest()
    envelope["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()
    (run_dir / STATEMENT_FILE).write_text(json.dumps(envelope))
    code, message = invoke("verify", str(run_dir), "--record")
    assert code == 1 and "signature does not match" in message
