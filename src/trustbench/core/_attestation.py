"""The signed record: an in-toto Statement binding `record.json` to the run it was graded from.

`report` writes `record.intoto.json` beside `record.json`: an in-toto Statement v1 whose subjects
are `record.json` and `report.html` (SHA-256 of their bytes) and whose predicate names what they
were computed from: the manifest hash, the ledger chain head (the `row_hash` of its last row, which
commits to every row before it), the trial counts and the trustbench version.

Signing. `report --sign-key KEY` wraps the statement in a DSSE envelope with an Ed25519 signature
(`_signing`; make a key pair with `trustbench keygen`); the signature's `keyid` names the key.
`verify --record --public-key KEY.pub` then refuses an unsigned statement, one signed by another
key (a re-signed record) and one whose signature does not verify (an altered one): a verifier
given a key never accepts an unsigned record. Without `--sign-key` the bare statement is written
and everything says "unsigned": it detects a record or report changed after the fact, or a
ledger that moved on, but anyone who can rewrite `record.json` can rewrite the statement too.
(An earlier HMAC mode is gone: whoever could check a shared-secret MAC could also forge it.)

`verify --record` recomputes every digest, the manifest hash and the ledger head from the files and
checks the signature when given a public key; it names the first thing that differs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trustbench import __version__
from trustbench._canonical import (
    DuplicateKeyError,
    file_sha256,
    loads_refusing_duplicate_keys,
)
from trustbench.core._outputs import write_atomically
from trustbench.core._signing import SCHEME, load_private_key, open_envelope, sign_envelope
from trustbench.core.ledger._head import STATEMENT_FILE as STATEMENT_FILE
from trustbench.core.ledger._store import TABLE_COLUMNS, open_for_reading
from trustbench.core.spec._manifest import read_manifest
from trustbench.errors import CheckFailed, InputError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
"""in-toto Statement v1 `_type`."""
PREDICATE_TYPE = "https://trustbench.dev/attestation/record/v1"
"""Our predicate type: a trustbench record and the run it was graded from."""
PAYLOAD_TYPE = "application/vnd.in-toto+json"
"""DSSE payload type of an in-toto statement."""
REMOVED_KEY_ENV = "TRUSTBENCH_RECORD_KEY"
"""The environment variable of the removed HMAC mode: `report` refuses to run while it is set,
so nobody believes a record was signed when it was not."""
SUBJECT_FILES = ("record.json", "report.html")
"""The files the statement is about."""


@dataclass
class RecordCheck:
    """Outcome of checking a run's signed record."""

    signing: str = "unsigned"
    """`unsigned`, `ed25519` (a signature verified under the given public key) or
    `not checked` (an envelope, but no public key was given)."""
    keyid: str | None = None
    """The key id of the verified signature, or the ids the envelope names when not checked."""
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


def write_record_statement(run_dir: Path, sign_key: Path | None = None) -> tuple[Path, str]:
    """Write `record.intoto.json` for the run's record: a signed DSSE envelope with `sign_key`.

    Returns:
        The path written and how it was signed (`unsigned`, or `ed25519 keyid …`).

    Raises:
        InputError: when `sign_key` is not an Ed25519 private key.
    """
    key = None if sign_key is None else load_private_key(sign_key)
    statement = build_statement(run_dir)
    payload = json.dumps(statement, indent=2, sort_keys=True).encode("utf-8")
    if key is None:
        document, signing = statement, "unsigned"
    else:
        document = sign_envelope(PAYLOAD_TYPE, payload, key)
        signing = f"{SCHEME} keyid {document['signatures'][0]['keyid'][:16]}…"
    path = run_dir / STATEMENT_FILE
    # A fixed temporary name would be followed if a link were planted there: write_atomically's
    # is random and exclusive, and its rename replaces a link at `path` rather than write through.
    write_atomically(path, (json.dumps(document, indent=2, sort_keys=True) + "\n").encode())
    return path, signing


def _read_document(path: Path, check: RecordCheck) -> dict[str, Any] | None:
    """The statement file's JSON object, read strictly (no key twice in one object)."""
    try:
        document = loads_refusing_duplicate_keys(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        check.problems.append(f"{path.name} is missing: run `trustbench report` to write it")
        return None
    except DuplicateKeyError as error:
        check.problems.append(_duplicate_problem(path.name, error))
        return None
    except (OSError, ValueError, RecursionError) as error:
        check.problems.append(f"{path.name} is not valid JSON: {error}")
        return None
    if not isinstance(document, dict):
        check.problems.append(f"{path.name} is not a JSON object")
        return None
    return document


def _read_statement(
    path: Path, check: RecordCheck, public_key: Ed25519PublicKey | None
) -> dict[str, Any] | None:
    document = _read_document(path, check)
    if document is None:
        return None
    if "payloadType" not in document and "payload" not in document:
        if public_key is not None:
            check.problems.append(
                f"{path.name} is UNSIGNED, and a public key was given: a verifier given a key "
                "never accepts an unsigned record (anyone could have written it)"
            )
        return document
    try:
        opened = open_envelope(document, public_key)
    except ValueError as error:
        check.problems.append(f"{path.name}: malformed DSSE envelope ({error})")
        return None
    if opened.payload_type != PAYLOAD_TYPE:
        check.problems.append(f"{path.name}: payloadType is {opened.payload_type!r}")
    if public_key is None:
        check.signing, check.keyid = "not checked", ", ".join(opened.keyids) or None
    elif opened.verified_keyid is None:
        check.problems.append(_signature_problem(path.name, opened.keyids, public_key))
    else:
        check.signing, check.keyid = SCHEME, opened.verified_keyid
    try:
        return loads_refusing_duplicate_keys(opened.payload)
    except DuplicateKeyError as error:
        check.problems.append(_duplicate_problem(f"{path.name}: the signed payload", error))
        return None
    except (ValueError, RecursionError) as error:
        check.problems.append(f"{path.name}: the signed payload is not JSON ({error})")
        return None


def _duplicate_problem(where: str, error: DuplicateKeyError) -> str:
    return (
        f"{where} names the key {error.args[0]!r} twice in one object: refused, since readers "
        "disagree on which one counts (the signature covers only one payload)"
    )


def _signature_problem(name: str, keyids: tuple[str, ...], public_key: Ed25519PublicKey) -> str:
    """Why no signature verifies: signed by another key (re-signed?) or altered after signing."""
    from trustbench.core._signing import key_id

    given = key_id(public_key)
    if given in keyids:
        return (
            f"{name}: the signature does not verify under the given public key (keyid "
            f"{given[:16]}…): the statement was altered after it was signed, or forged"
        )
    named = ", ".join(k[:16] + "…" for k in keyids) or "no key id"
    return (
        f"{name}: no signature by the given public key (keyid {given[:16]}…); it names {named}: "
        "signed (or re-signed) by another key"
    )


def check_record_statement(
    run_dir: Path, public_key: Ed25519PublicKey | None = None
) -> RecordCheck:
    """Check `record.intoto.json` against the run folder's files (run `verify_run` first).

    Recomputes the subject digests, the manifest hash recorded in `record.json`, the ledger head
    and the trial counts; with `public_key`, requires a DSSE envelope with a signature that
    verifies under it (an unsigned statement is then a problem, never a pass).
    """
    check = RecordCheck()
    statement = _read_statement(run_dir / STATEMENT_FILE, check, public_key)
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
    from trustbench.core.report._record import trial_rows_problems

    problems = [
        f"record.json says {name} {record.get(name)!r}, the run has {predicate[name]!r}"
        for name in ("manifest_sha256", "planned_trials", "finished_trials")
        if not isinstance(record, dict) or record.get(name) != predicate[name]
    ]
    # The per-trial rows sit beside the record, committed to by the sha256 it names: the
    # statement's digest of record.json covers them only through that check.
    return problems + (trial_rows_problems(run_dir, record) if isinstance(record, dict) else [])


def require_record(run_dir: Path, public_key: Path | None = None) -> RecordCheck:
    """Check the signed record (see `check_record_statement`), under the public key in a file.

    Raises:
        CheckFailed: naming the first difference.
        InputError: when `public_key` is not an Ed25519 public key file.
    """
    from trustbench.core._signing import load_public_key

    key = None if public_key is None else load_public_key(public_key)
    check = check_record_statement(run_dir, key)
    if not check.ok:
        raise CheckFailed(check.problems[0], location=str(run_dir / STATEMENT_FILE))
    return check


def statement_signing(run_dir: Path) -> str:
    """How the run's statement is signed: `ed25519 keyid …`, `unsigned` or `absent` (messages)."""
    try:
        document = json.loads((run_dir / STATEMENT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return "absent"
    if not isinstance(document, dict) or "payloadType" not in document:
        return "unsigned"
    keyids = [
        str(s.get("keyid"))[:16] + "…"
        for s in document.get("signatures") or []
        if isinstance(s, dict) and s.get("keyid")
    ]
    return f"{SCHEME} keyid {', '.join(keyids) or '?'}"
