"""The signed record: `record.intoto.json` beside `record.json`, checked by `verify --record`."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from tests.rtb.test_review_track import PERMIT_ALL, POLICY, run_spec, spec_text
from tests.support.child_env import child_env
from tests.support.cli import invoke

from trustbench.core import REMOVED_KEY_ENV, STATEMENT_FILE, export_ledger, pae, report_run

ROOT = Path(__file__).resolve().parents[2]


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


def test_edited_per_trial_rows_fail_verify_record_naming_the_rows_file(
    reported: Path, tmp_path: Path
) -> None:
    # The rows live beside record.json, which names their sha256: a flipped outcome in them
    # must not pass the signed-record check that record.json itself passes.
    from trustbench.core.report import TRIAL_ROWS_FILE

    run_dir = _copy(reported, tmp_path)
    rows = (run_dir / TRIAL_ROWS_FILE).read_text().splitlines()
    first = json.loads(rows[0])
    first["trial_index"] = int(first.get("trial_index", 0)) + 1
    rows[0] = json.dumps(first)
    (run_dir / TRIAL_ROWS_FILE).write_text("\n".join(rows) + "\n")
    code, message = invoke("verify", str(run_dir), "--record")
    assert code == 1 and TRIAL_ROWS_FILE in message, message


def test_rewritten_unsigned_statement_is_caught_by_recomputed_ledger_head(
    reported: Path, tmp_path: Path
) -> None:
    # The cheap forgery: claim a different ledger head (e.g. a record graded from another run).
    run_dir = _copy(reported, tmp_path)
    statement = json.loads((run_dir / STATEMENT_FILE).read_text())
    statement["predicate"]["ledger_head"]["row_hash"] = "0" * 64
    (run_dir / STATEMENT_FILE).write_text(json.dumps(statement))
    code, message = invoke("verify", str(run_dir), "--record")
    # The ledger-against-record check (run before the statement's own fields are compared) names
    # the disagreement: the head the statement claims is not the ledger's.
    assert code == 1 and "the ledger disagrees with record.intoto.json" in message


def test_missing_statement_fails_verify_record(reported: Path, tmp_path: Path) -> None:
    run_dir = _copy(reported, tmp_path)
    (run_dir / STATEMENT_FILE).unlink()
    code, message = invoke("verify", str(run_dir), "--record")
    assert code == 1 and "record.intoto.json is missing" in message


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two key pairs from `trustbench keygen`: the signer's and an attacker's."""
    folder = tmp_path_factory.mktemp("keys")
    for name in ("signer", "attacker"):
        code, output = invoke("keygen", str(folder / name))
        assert code == 0, output
    return {
        "signer": folder / "signer",
        "signer.pub": folder / "signer.pub",
        "attacker": folder / "attacker",
        "attacker.pub": folder / "attacker.pub",
    }


@pytest.fixture
def signed(reported: Path, tmp_path: Path, keys: dict[str, Path]) -> Path:
    run_dir = _copy(reported, tmp_path)
    code, output = invoke("report", str(run_dir), "--sign-key", str(keys["signer"]))
    assert code == 0 and "ed25519 keyid" in output
    return run_dir


def test_pae_matches_the_dsse_protocol_test_vector() -> None:
    # protocol.md of github.com/secure-systems-lab/dsse, v1.0.0: lengths in ASCII decimal.
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_keygen_writes_a_private_key_only_its_owner_reads(keys: dict[str, Path]) -> None:
    assert keys["signer"].stat().st_mode & 0o077 == 0
    assert b"BEGIN PUBLIC KEY" in keys["signer.pub"].read_bytes()
    code, message = invoke("keygen", str(keys["signer"]))
    assert code == 2 and "existing file" in message


def test_signed_record_is_a_dsse_envelope_that_verifies_under_the_public_key(
    signed: Path, keys: dict[str, Path]
) -> None:
    envelope = json.loads((signed / STATEMENT_FILE).read_text())
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    payload = json.loads(base64.b64decode(envelope["payload"]))
    assert payload["_type"] == "https://in-toto.io/Statement/v1"
    public = serialization.load_pem_public_key(keys["signer.pub"].read_bytes())
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert envelope["signatures"][0]["keyid"] == hashlib.sha256(raw).hexdigest()
    # Checked with the library directly, not through our verifier.
    public.verify(
        base64.b64decode(envelope["signatures"][0]["sig"]),
        pae(envelope["payloadType"], base64.b64decode(envelope["payload"])),
    )
    code, output = invoke(
        "verify", str(signed), "--record", "--public-key", str(keys["signer.pub"])
    )
    assert code == 0 and "Ed25519 signature by keyid" in output
    code, output = invoke("verify", str(signed), "--record")
    assert code == 0 and "NOT CHECKED" in output


def test_verifier_given_a_key_refuses_an_unsigned_record(
    reported: Path, keys: dict[str, Path]
) -> None:
    code, message = invoke(
        "verify", str(reported), "--record", "--public-key", str(keys["signer.pub"])
    )
    assert code == 1 and "UNSIGNED" in message


def test_downgrade_to_unsigned_after_rewriting_is_refused_with_the_key(
    signed: Path, keys: dict[str, Path]
) -> None:
    # The attack of issue 30: rewrite the record, re-run report without the key.
    code, _ = invoke("report", str(signed))
    assert code == 0
    code, message = invoke(
        "verify", str(signed), "--record", "--public-key", str(keys["signer.pub"])
    )
    assert code == 1 and "UNSIGNED" in message


def test_record_re_signed_by_another_key_is_refused(signed: Path, keys: dict[str, Path]) -> None:
    code, _ = invoke("report", str(signed), "--sign-key", str(keys["attacker"]))
    assert code == 0
    code, message = invoke(
        "verify", str(signed), "--record", "--public-key", str(keys["signer.pub"])
    )
    assert code == 1 and "signed (or re-signed) by another key" in message


def test_payload_altered_under_the_signers_key_id_fails_the_signature(
    signed: Path, keys: dict[str, Path]
) -> None:
    record = json.loads((signed / "record.json").read_text())
    record["gates"] = []
    (signed / "record.json").write_text(json.dumps(record))
    envelope = json.loads((signed / STATEMENT_FILE).read_text())
    payload = json.loads(base64.b64decode(envelope["payload"]))
    payload["subject"][0]["digest"]["sha256"] = hashlib.sha256(
        (signed / "record.json").read_bytes()
    ).hexdigest()
    envelope["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()
    (signed / STATEMENT_FILE).write_text(json.dumps(envelope))
    code, message = invoke(
        "verify", str(signed), "--record", "--public-key", str(keys["signer.pub"])
    )
    assert code == 1 and "altered after it was signed" in message


def test_url_safe_base64_envelope_is_accepted_as_dsse_requires(
    signed: Path, keys: dict[str, Path]
) -> None:
    envelope = json.loads((signed / STATEMENT_FILE).read_text())
    envelope["payload"] = base64.urlsafe_b64encode(base64.b64decode(envelope["payload"])).decode()
    for signature in envelope["signatures"]:
        signature["sig"] = base64.urlsafe_b64encode(base64.b64decode(signature["sig"])).decode()
    (signed / STATEMENT_FILE).write_text(json.dumps(envelope))
    code, output = invoke(
        "verify", str(signed), "--record", "--public-key", str(keys["signer.pub"])
    )
    assert code == 0, output


def test_removed_hmac_key_variable_makes_report_refuse(
    reported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = _copy(reported, tmp_path)
    before = (run_dir / STATEMENT_FILE).read_bytes()
    monkeypatch.setenv(REMOVED_KEY_ENV, "test-record-key-0123456789abcdef")
    code, message = invoke("report", str(run_dir))
    assert code == 2 and "--sign-key" in message
    assert (run_dir / STATEMENT_FILE).read_bytes() == before


def test_bad_sign_key_file_is_refused_before_anything_is_written(
    reported: Path, tmp_path: Path, keys: dict[str, Path]
) -> None:
    run_dir = _copy(reported, tmp_path)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    code, message = invoke("report", str(run_dir), "--sign-key", str(keys["signer.pub"]))
    assert code == 2 and "private key" in message
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before


def _verify_in_a_subprocess(run_dir: Path, public_key: Path) -> subprocess.CompletedProcess[str]:
    """`python -m trustbench verify RUN --record --public-key KEY`, as a user runs it."""
    env = child_env(run_dir.parent)
    command = [sys.executable, "-m", "trustbench", "verify", str(run_dir), "--record"]
    return subprocess.run(
        [*command, "--public-key", str(public_key)],
        cwd=run_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _duplicate_payload(envelope: dict[str, Any]) -> str:
    # A forged payload first, the signed one last: json.loads keeps the last, so the signature
    # checks while a reader that keeps the first sees the forgery.
    forged = base64.b64encode(b'{"predicate": "forged"}').decode()
    signed_payload = json.dumps(envelope["payload"])
    text = json.dumps(envelope)
    return text.replace(
        f'"payload": {signed_payload}', f'"payload": "{forged}", "payload": {signed_payload}'
    )


def _duplicate_keyid_in_a_signature(envelope: dict[str, Any]) -> str:
    keyid = json.dumps(envelope["signatures"][0]["keyid"])
    return json.dumps(envelope).replace(f'"keyid": {keyid}', f'"keyid": "00", "keyid": {keyid}')


def _unsigned_extra_field(envelope: dict[str, Any]) -> str:
    return json.dumps({**envelope, "predicate": {"gates": "all passed"}})


def _unsigned_extra_field_in_a_signature(envelope: dict[str, Any]) -> str:
    envelope["signatures"][0]["approved_by"] = "release board"
    return json.dumps(envelope)


@pytest.mark.parametrize(
    ("tamper", "named"),
    [
        (_duplicate_payload, "the key 'payload' twice"),
        (_duplicate_keyid_in_a_signature, "the key 'keyid' twice"),
        (_unsigned_extra_field, "unsigned field(s) DSSE does not define: ['predicate']"),
        (_unsigned_extra_field_in_a_signature, "signatures[0] has unsigned field(s)"),
    ],
)
def test_envelope_with_a_duplicate_key_or_an_unsigned_field_is_refused_by_verify(
    signed: Path, keys: dict[str, Path], tamper: Callable[[dict[str, Any]], str], named: str
) -> None:
    envelope = json.loads((signed / STATEMENT_FILE).read_text())
    (signed / STATEMENT_FILE).write_text(tamper(envelope))
    result = _verify_in_a_subprocess(signed, keys["signer.pub"])
    assert result.returncode == 1, result.stdout + result.stderr
    assert STATEMENT_FILE in result.stderr and named in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
