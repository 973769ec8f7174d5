"""The signed record: an in-toto Statement binding `record.json` to the run it was graded from.

`report` writes `record.intoto.json` beside `record.json`: an in-toto Statement v1 whose subjects
are `record.json` and `report.html` (SHA-256 of their bytes) and whose predicate names what they
were computed from: the manifest hash, the ledger chain head (the `row_hash` of its last row, which
commits to every row before it), the trial counts and the trustbench version.

Signing. With `TRUSTBENCH_RECORD_KEY` set, the statement is wrapped in a DSSE envelope signed with
HMAC-SHA256 over DSSE's pre-authentication encoding. That is a *shared-secret MAC*, not a
public-key signature: anyone who can check it can also forge it, so it proves the record came from
a holder of the key, not from a particular party. (No public-key library is a dependency here.)
Without the variable the bare statement is written and everything says "unsigned": an unsigned
statement detects a record or report changed after the fact, or a ledger that moved on, but anyone
who can rewrite `record.json` can rewrite the statement too.

`verify --record` recomputes every digest, the manifest hash and the ledger head from the files and
checks the MAC when there is one; it names the first thing that differs.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trustbench import __version__
from trustbench._canonical import file_sha256
from trustbench.core._ledger import TABLE_COLUMNS, open_for_reading
from trustbench.core._manifest import read_manifest
from trustbench.errors import CheckFailed, InputError

STATEMENT_FILE = "record.intoto.json"
"""Name of the statement (or its DSSE envelope) in a run folder."""
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
"""in-toto Statement v1 `_type`."""
PREDICATE_TYPE = "https://trustbench.dev/attestation/record/v1"
"""Our predicate type: a trustbench record and the run it was graded from."""
PAYLOAD_TYPE = "application/vnd.in-toto+json"
"""DSSE payload type of an in-toto statement."""
KEY_ENV = "TRUSTBENCH_RECORD_KEY"
"""Environment variable holding the HMAC-SHA256 key (at least 16 bytes)."""
KEY_ID = "trustbench-hmac-sha256"
"""`keyid` written into a signature: names the scheme, never anything derived from the key."""
SUBJECT_FILES = ("record.json", "report.html")
"""The files the statement is about."""


@dataclass
class RecordCheck:
    """Outcome of checking a run's signed record."""

    signing: str = "unsigned"
    """`unsigned`, or `hmac-sha256` when the statement came in a DSSE envelope with a MAC."""
    problems: list[str] = field(default_factory=list)
    """What differs, the first problem first; empty means every check passed."""

    @property
    def ok(self) -> bool:
        """True when nothing differs (an unsigned statement can be ok; `signing` says so)."""
        return not self.problems


def ledger_head(run_dir: Path) -> dict[str, Any]:
    """The ledger's chain head: `row_hash` and `seq` of its last row, and the row counts.

    Three indexed queries per table instead of a pass over every row (a 100,000-trial ledger
    holds gigabytes of replies). Run `verify_run` first: only an intact chain makes the row with
    the highest `seq` the head that commits to all the others.
    """
    connection = open_for_reading(run_dir)
    head: dict[str, Any] = {"row_hash": None, "seq": 0, "rows": 0, "trial_rows": 0}
    try:
        for table in TABLE_COLUMNS:
            count = connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            head["rows"] += count
            if table == "trials":
                head["trial_rows"] = count
            last = connection.execute(
                f"SELECT seq, row_hash FROM {table} ORDER BY seq DESC LIMIT 1"
            ).fetchone()
            if last is not None and last[0] > head["seq"]:
                head["seq"], head["row_hash"] = last
    finally:
        connection.close()
    return head


def build_statement(run_dir: Path) -> dict[str, Any]:
    """The in-toto statement for the run folder's current `record.json` and `report.html`.

    The predicate is computed from the sources, not copied from the record: the manifest hash
    from `manifest.json` (re-hashed by `read_manifest`), the head and trial count from the ledger.
    """
    manifest = read_manifest(run_dir)
    head = ledger_head(run_dir)
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": name, "digest": {"sha256": file_sha256(run_dir / name)}}
            for name in SUBJECT_FILES
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "manifest_sha256": manifest.manifest_sha256,
            "ledger_head": {"row_hash": head["row_hash"], "seq": head["seq"], "rows": head["rows"]},
            "planned_trials": manifest.plan.trials,
            "finished_trials": head["trial_rows"],
            "trustbench_version": __version__,
        },
    }


def _pae(payload_type: str, payload: bytes) -> bytes:
    # DSSE v1 pre-authentication encoding: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body,
    # lengths in ASCII decimal (github.com/secure-systems-lab/dsse, protocol.md). Signing the
    # PAE rather than the payload binds the payload type too.
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def _key() -> bytes | None:
    value = os.environ.get(KEY_ENV)
    if not value:
        return None
    key = value.encode("utf-8")
    if len(key) < 16:
        raise InputError(f"${KEY_ENV} is shorter than 16 bytes: too weak a key for a MAC")
    return key


def _mac(key: bytes, payload: bytes) -> str:
    digest = hmac.new(key, _pae(PAYLOAD_TYPE, payload), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def write_record_statement(run_dir: Path) -> tuple[Path, str]:
    """Write `record.intoto.json` for the run's record: DSSE-wrapped with a MAC when keyed.

    Returns:
        The path written and how it was signed (`unsigned` or `hmac-sha256`).
    """
    statement = build_statement(run_dir)
    payload = json.dumps(statement, indent=2, sort_keys=True).encode("utf-8")
    key = _key()
    if key is None:
        document, signing = statement, "unsigned"
    else:
        document = {
            "payloadType": PAYLOAD_TYPE,
            "payload": base64.b64encode(payload).decode("ascii"),
            "signatures": [{"keyid": KEY_ID, "sig": _mac(key, payload)}],
        }
        signing = "hmac-sha256"
    path = run_dir / STATEMENT_FILE
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path, signing


def _read_statement(path: Path, check: RecordCheck) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        check.problems.append(f"{path.name} is missing: run `trustbench report` to write it")
        return None
    except (OSError, ValueError) as error:
        check.problems.append(f"{path.name} is not valid JSON: {error}")
        return None
    if not isinstance(document, dict) or "payloadType" not in document:
        return document if isinstance(document, dict) else None
    check.signing = "hmac-sha256"
    try:
        payload = base64.b64decode(document["payload"], validate=True)
        signatures = document["signatures"]
    except (KeyError, TypeError, ValueError) as error:
        check.problems.append(f"{path.name}: malformed DSSE envelope ({error})")
        return None
    if document["payloadType"] != PAYLOAD_TYPE:
        check.problems.append(f"{path.name}: payloadType is {document['payloadType']!r}")
    key = _key()
    if key is None:
        check.problems.append(
            f"{path.name} carries an HMAC-SHA256 signature but ${KEY_ENV} is not set: "
            "the signature cannot be checked"
        )
    elif not any(
        isinstance(s, dict) and hmac.compare_digest(str(s.get("sig", "")), _mac(key, payload))
        for s in signatures
    ):
        check.problems.append(
            f"{path.name}: the HMAC-SHA256 signature does not match the statement "
            f"(wrong ${KEY_ENV}, or the statement was altered)"
        )
    try:
        return json.loads(payload)
    except ValueError as error:
        check.problems.append(f"{path.name}: the signed payload is not JSON ({error})")
        return None


def check_record_statement(run_dir: Path) -> RecordCheck:
    """Check `record.intoto.json` against the run folder's files (run `verify_run` first).

    Recomputes the subject digests, the manifest hash recorded in `record.json`, the ledger head
    and the trial counts, and checks the MAC when the statement is signed.
    """
    check = RecordCheck()
    statement = _read_statement(run_dir / STATEMENT_FILE, check)
    if statement is None:
        return check
    if statement.get("_type") != STATEMENT_TYPE or statement.get("predicateType") != (
        PREDICATE_TYPE
    ):
        check.problems.append(f"{STATEMENT_FILE} is not a trustbench in-toto record statement")
        return check
    try:
        expected = build_statement(run_dir)
    except (InputError, OSError) as error:
        check.problems.append(str(error))
        return check
    subjects = statement.get("subject")
    stated = {
        s.get("name"): (s.get("digest") or {}).get("sha256")
        for s in (subjects if isinstance(subjects, list) else [])
        if isinstance(s, dict)
    }
    for subject in expected["subject"]:
        name, digest = subject["name"], subject["digest"]["sha256"]
        if stated.get(name) != digest:
            check.problems.append(
                f"{name} differs from the statement (sha256 {str(stated.get(name))[:12]}… stated, "
                f"{digest[:12]}… now)"
            )
    predicate = statement.get("predicate")
    predicate = predicate if isinstance(predicate, dict) else {}
    check.problems += _record_problems(run_dir, expected["predicate"])
    for key, value in expected["predicate"].items():
        # The version is the writer's: a newer trustbench checking an older record is fine.
        if key != "trustbench_version" and predicate.get(key) != value:
            check.problems.append(
                f"predicate.{key} differs: stated {predicate.get(key)!r}, recomputed {value!r}"
            )
    return check


def _record_problems(run_dir: Path, predicate: dict[str, Any]) -> list[str]:
    """Where `record.json` itself disagrees with the run it is attested to come from."""
    path = run_dir / "record.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return [f"cannot read record.json: {error}"]
    return [
        f"record.json says {name} {record.get(name)!r}, the run has {predicate[name]!r}"
        for name in ("manifest_sha256", "planned_trials", "finished_trials")
        if not isinstance(record, dict) or record.get(name) != predicate[name]
    ]


def require_record(run_dir: Path) -> RecordCheck:
    """Check the signed record (see `check_record_statement`).

    Raises:
        CheckFailed: naming the first difference.
    """
    check = check_record_statement(run_dir)
    if not check.ok:
        raise CheckFailed(check.problems[0], location=str(run_dir / STATEMENT_FILE))
    return check


def statement_signing(run_dir: Path) -> str:
    """How the run's statement is signed: `hmac-sha256`, `unsigned` or `absent` (for messages)."""
    try:
        document = json.loads((run_dir / STATEMENT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "absent"
    return "hmac-sha256" if isinstance(document, dict) and "payloadType" in document else "unsigned"
