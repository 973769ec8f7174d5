"""Independent review of reference decisions: a frozen protocol, a hash-chained record, `apply`.

The spec's "Give the Reference Decision Its Own Evidence": a reference decision is the answer
key, not truth, so reviewers who did not write it examine it, and their disagreements are kept.
This module is the data path behind `trustbench rtb adjudicate`:

- the protocol (`AdjudicationProtocol`) is frozen first, as the record's first entry: which
  corpus (its MANIFEST sha256), which cases, how many reviewers, the adjudication rule. Nothing a
  reviewer submits can change it afterwards;
- the record is a JSON Lines file, append-only: each entry hashes the one before it (like the
  ledger's rows), optionally signed with an Ed25519 key; one review entry per (reviewer, case),
  whether imported from a file (`import_reviews`) or submitted in the web app
  (`rtb adjudicate serve`, `adjudication_app`): both go through `record_reviews`;
- under the `adjudicated` rule a disagreement goes to an adjudicator who did not review the
  case: one `adjudication` entry per case (`record_adjudication`), kept beside both reviews;
- `adjudication_report` compares the reviews with the authored labels and with each other;
- `apply_record` turns the record into each case's `reference_status` and rewrites the corpus's
  MANIFEST through `write_manifest`, never by hand.

Every command reads the whole record and verifies its chain first, so one changed byte refuses
them all with the line at fault. A bad review file is refused before anything is appended.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import random
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from trustbench._canonical import (
    canonical_json,
    loads_refusing_duplicate_keys,
    read_input_file,
    sha256_hex,
)
from trustbench._docstrings import documented
from trustbench.core import (
    load_private_key,
    load_public_key,
    open_envelope,
    sign_envelope,
    utc_now,
)
from trustbench.errors import CheckFailed, InputError

__all__ = [
    "AdjudicationProtocol",
    "AdjudicationRecord",
    "Qualification",
    "ReferenceReview",
    "adjudication_report",
    "apply_record",
    "awaiting_adjudication",
    "first_error",
    "freeze_protocol",
    "import_reviews",
    "loaded_corpus",
    "rationale_of",
    "read_record",
    "record_adjudication",
    "record_reviews",
    "report_text",
    "verify_record",
]

DECISIONS = ("permit", "deny", "hold")
"""The categories a reviewer and a label choose from (agreement tables use this order)."""
GENESIS = "0" * 64
"""The `prev` of the first entry: nothing came before it."""
SIGNED_PAYLOAD_TYPE = "application/vnd.trustbench.adjudication-entry+sha256"
"""DSSE payload type of an entry's signature; the signed payload is the entry's hash."""
Selection = Literal["all", "sample", "consequential", "listed"]
AdjudicationRule = Literal["unanimous", "majority", "adjudicated"]
CaseStatus = Literal["reviewed", "disputed", "pending"]
EntryKind = Literal["protocol", "review", "adjudication", "applied"]


class _Frozen(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class AdjudicationProtocol(_Frozen):
    """What will be reviewed and how disagreements are settled, fixed before any review."""

    format: Literal["trustbench-rtb-adjudication-protocol"] = "trustbench-rtb-adjudication-protocol"
    """Identifies the document."""
    corpus: str
    """`builtin:v<version>` or the corpus folder's path."""
    corpus_manifest_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """SHA-256 of the corpus's MANIFEST.json when frozen: reviews are of exactly these cases."""
    selection: Selection
    """`all` cases; a `sample` of `sample_per_group` per domain group drawn with `seed`;
    the `consequential` cases (reference decision in `consequential_decisions`); or the cases
    `listed` in a file."""
    sample_per_group: int | None = None
    """Cases drawn per domain group (`sample` only)."""
    seed: int | None = None
    """Seed of the draw (`sample` only): the same seed draws the same cases."""
    consequential_decisions: list[str] = Field(default_factory=lambda: ["deny", "hold"])
    """A case is consequential when its authored reference decision is one of these."""
    reviewers_per_case: int = Field(default=1, ge=1)
    """Independent reviews a case needs before it can read `reviewed` or `disputed`."""
    blind_second_review: bool = True
    """A consequential case needs a second review made without seeing candidate verdicts (or
    the first review): it stays `pending` with fewer than two."""
    adjudication_rule: AdjudicationRule = "unanimous"
    """`unanimous`: every review must agree with the label for `reviewed`, any other decision
    makes the case `disputed`; `majority`: more than half must agree; `adjudicated`: a case
    whose reviews do not all agree with the label goes to an adjudicator (someone who did not
    review it), whose decision settles it: `reviewed` when it upholds the label, `disputed`
    when it does not or until it is made. Disagreements are kept under every rule."""
    cases: list[str]
    """The case ids under review, sorted: a review of any other case is refused."""

    def reviews_needed(self, reference: str) -> int:
        """How many reviews a case with this authored reference decision needs."""
        consequential = reference in self.consequential_decisions
        return max(self.reviewers_per_case, 2 if consequential and self.blind_second_review else 1)


class Qualification(_Frozen):
    """Who reviewed, as they declared it (pseudonymous; not verified by trustbench)."""

    reviewer_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    """Pseudonymous reviewer id."""
    role: str = Field(min_length=1)
    """Declared role and kind of reviewer, verbatim (e.g. an AI evaluator, not a human)."""
    years: int | None = Field(default=None, ge=0)
    """Declared years of domain experience; None when not stated."""

    def text(self) -> str:
        """One line: id, role, years."""
        years = "not stated" if self.years is None else str(self.years)
        return f"{self.reviewer_id}: {self.role} (years of experience: {years})"


class ReferenceReview(_Frozen):
    """One reviewer's decision on one case, with what it rests on."""

    case_id: str
    """The case reviewed."""
    decision: Literal["permit", "deny", "hold"]
    """The reviewer's decision."""
    governing_rules: list[str] = Field(default_factory=list)
    """Rule ids the reviewer found decisive (e.g. `r4`)."""
    facts_relied_on: list[str] = Field(default_factory=list)
    """Record ids of the case's evidence the decision rests on."""
    evidence: str = ""
    """The supporting evidence, in the reviewer's words."""
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    """Declared confidence, 0 to 1; None when not stated."""
    notes: str = ""
    """Free-text notes."""


class RecordEntry(_Frozen):
    """One line of the record."""

    seq: int
    """Position in the record, from 0 (the protocol)."""
    kind: EntryKind
    """What the body holds."""
    at: str
    """UTC time of writing."""
    body: dict[str, Any]
    """The protocol, a review or an adjudication (with its author's qualification and source)
    or an `apply` result."""
    prev: str
    """Hash of the previous entry (`GENESIS` for the first)."""
    hash: str
    """sha256(prev || canonical JSON of seq, kind, at, body)."""
    signature: dict[str, str] | None = None
    """Ed25519 signature of `hash` (DSSE `keyid` and `sig`) when written with `--sign-key`."""


def entry_hash(prev: str, seq: int, kind: str, at: str, body: dict[str, Any]) -> str:
    """The chained hash of one entry, as the ledger chains its rows."""
    content = canonical_json({"seq": seq, "kind": kind, "at": at, "body": body})
    return sha256_hex(prev.encode("ascii") + content)


@dataclass(frozen=True)
class RecordedReview:
    """A review (or an adjudication) as recorded: who, what, and where it came from."""

    qualification: Qualification
    review: ReferenceReview
    source: str
    """`file:row` the review was imported from (`adjudicate-serve:N` from the web app)."""
    blind: bool = False
    """Declared made without seeing candidate verdicts, the label or other reviews (an import
    declares it with `--blind` or a `# blind: yes` header; the web app records every review
    blind). A record written before the field reads False: not declared is not blind."""

    @classmethod
    def of(cls, entry: RecordEntry) -> RecordedReview:
        """The review a `review` or `adjudication` entry holds (both use the same body)."""
        return cls(
            qualification=Qualification.model_validate(entry.body["qualification"]),
            review=ReferenceReview.model_validate(entry.body["review"]),
            source=str(entry.body.get("source", "")),
            blind=entry.body.get("blind") is True,
        )


@dataclass(frozen=True)
class AdjudicationRecord:
    """A verified record: the protocol, every review, and the chain's head."""

    path: Path
    protocol: AdjudicationProtocol
    entries: list[RecordEntry]

    @property
    def head(self) -> str:
        """Hash of the last entry: it vouches for everything before it."""
        return self.entries[-1].hash

    def reviews(self) -> list[RecordedReview]:
        """The review entries in record order."""
        return [RecordedReview.of(entry) for entry in self.entries if entry.kind == "review"]

    def adjudications(self) -> dict[str, RecordedReview]:
        """Case id -> its adjudication (at most one per case: one is never replaced)."""
        found = [RecordedReview.of(e) for e in self.entries if e.kind == "adjudication"]
        return {recorded.review.case_id: recorded for recorded in found}

    def statuses(self, labels: dict[str, str]) -> dict[str, CaseStatus]:
        """Every case of the protocol with its status under the rule, adjudications counted."""
        adjudicated = {case_id: r.review.decision for case_id, r in self.adjudications().items()}
        return {
            case_id: status_under_protocol(
                self.protocol,
                labels[case_id],
                own,
                adjudicated.get(case_id),
            )
            for case_id, own in self.reviews_by_case().items()
        }

    def reviews_by_case(self) -> dict[str, list[RecordedReview]]:
        """Every case of the protocol (in its order) with its reviews (none yet: empty)."""
        by_case: dict[str, list[RecordedReview]] = {case_id: [] for case_id in self.protocol.cases}
        for recorded in self.reviews():
            by_case[recorded.review.case_id].append(recorded)
        return by_case

    def accepted_manifests(self) -> set[str]:
        """Corpus MANIFEST hashes the record vouches for: the frozen one and each `apply`'s."""
        applied = {e.body["manifest_sha256_after"] for e in self.entries if e.kind == "applied"}
        return {self.protocol.corpus_manifest_sha256} | applied


# ------------------------------------------------------------------------------------------------
# Reading and appending: the chain is verified whole before anything reads or adds to it.


def _tampered(path: Path, line: int, what: str) -> CheckFailed:
    return CheckFailed(
        f"{path}: line {line}: {what}; the adjudication record changed after it was written "
        "(nothing was read from it)"
    )


def _parsed_entry(path: Path, line: int, raw: bytes) -> RecordEntry:
    try:
        return RecordEntry.model_validate(loads_refusing_duplicate_keys(raw))
    except (ValueError, ValidationError) as error:
        first = str(error).splitlines()[0]
        raise _tampered(path, line, f"not a record entry ({first})") from None


def read_record(path: Path) -> AdjudicationRecord:
    """Read and verify a record: every entry's hash, its link to the one before, its position.

    Raises:
        InputError: no such file.
        CheckFailed: any entry differs from what was written, naming its line and entry.
    """
    data = read_input_file(path, missing="no adjudication record (write one with `protocol`)")
    previous = GENESIS
    entries: list[RecordEntry] = []
    for line, raw in enumerate(data.split(b"\n"), start=1):
        if not raw and line == data.count(b"\n") + 1:
            break  # the newline ending the last entry
        entry = _parsed_entry(path, line, raw)
        expected = entry_hash(previous, entry.seq, entry.kind, entry.at, entry.body)
        if entry.seq != line - 1 or entry.prev != previous or entry.hash != expected:
            raise _tampered(path, line, f"entry {entry.seq} does not hash to its recorded hash")
        if (entry.kind == "protocol") != (line == 1):
            raise _tampered(path, line, f"entry {entry.seq}: the protocol must be entry 0 only")
        entries.append(entry)
        previous = entry.hash
    if not entries:
        raise _tampered(path, 1, "the record is empty")
    try:
        protocol = AdjudicationProtocol.model_validate(entries[0].body)
    except ValidationError as error:
        raise _tampered(path, 1, f"protocol: {str(error).splitlines()[0]}") from None
    return AdjudicationRecord(path=path, protocol=protocol, entries=entries)


def _entry_lines(
    start: int, previous: str, items: list[tuple[EntryKind, dict[str, Any]]], sign_key: Path | None
) -> bytes:
    """Chained, optionally signed entries after `previous`, as the bytes to append."""
    key = None if sign_key is None else load_private_key(sign_key)
    lines = []
    for offset, (kind, body) in enumerate(items):
        seq, at = start + offset, utc_now()
        digest = entry_hash(previous, seq, kind, at, body)
        signature = None
        if key is not None:
            signature = sign_envelope(SIGNED_PAYLOAD_TYPE, digest.encode("ascii"), key)
            signature = dict(signature["signatures"][0])
        entry = RecordEntry(
            seq=seq, kind=kind, at=at, body=body, prev=previous, hash=digest, signature=signature
        )
        lines.append(canonical_json(entry.model_dump(mode="json", exclude_none=True)) + b"\n")
        previous = digest
    return b"".join(lines)


def _append(
    record: AdjudicationRecord, items: list[tuple[EntryKind, dict[str, Any]]], sign_key: Path | None
) -> None:
    """Append entries to a verified record (never rewrites a byte already there)."""
    data = _entry_lines(len(record.entries), record.head, items, sign_key)
    with record.path.open("ab") as handle:
        handle.write(data)


@dataclass(frozen=True)
class RecordCheck:
    """What `verify_record` established about a record."""

    entries: int
    """Entries whose hash and link to the one before were recomputed."""
    head: str
    """Hash of the last entry."""
    signed: int
    """Entries that carry a signature."""
    verified_keyid: str | None
    """Key id of the public key every entry's signature verified under; None when no key was
    given (then no signature was checked)."""


def _verified_keyid(line: int, entry: RecordEntry, public_key: Any, record: Path) -> str:
    """The key id under which an entry's signature verifies; CheckFailed naming it otherwise.

    The entry's DSSE envelope is rebuilt (payload: the entry's hash) and opened by
    `open_envelope`, exactly as `trustbench verify --record` opens a run's signed record.
    """
    where = f"{record}: line {line}: entry {entry.seq}"
    if entry.signature is None:
        raise CheckFailed(f"{where} is unsigned (a signed record is signed in every entry)")
    envelope = {
        "payloadType": SIGNED_PAYLOAD_TYPE,
        "payload": base64.b64encode(entry.hash.encode("ascii")).decode("ascii"),
        "signatures": [entry.signature],
    }
    try:
        opened = open_envelope(envelope, public_key)
    except ValueError as error:
        raise CheckFailed(f"{where} has a malformed signature ({first_error(error)})") from None
    if opened.verified_keyid is None:
        raise CheckFailed(f"{where}: its signature does not verify under the public key given")
    return opened.verified_keyid


def verify_record(path: Path, public_key: Path | None = None) -> RecordCheck:
    """Check a record's hash chain and, with a public key, every entry's Ed25519 signature.

    The chain alone shows the file was not changed by accident: whoever rewrites an entry can
    recompute every hash after it. Only a signature under the signer's public key shows that no
    one without the private key wrote or rewrote an entry, so with `public_key` an unsigned
    entry fails too.

    Raises:
        InputError: no such record, or `public_key` is not an Ed25519 public key file.
        CheckFailed: naming the file, line and entry of the first entry that fails.
    """
    key = None if public_key is None else load_public_key(public_key)
    record = read_record(path)
    keyids = {
        _verified_keyid(line, entry, key, path)
        for line, entry in enumerate(record.entries, start=1)
        if key is not None
    }
    return RecordCheck(
        entries=len(record.entries),
        head=record.head,
        signed=sum(entry.signature is not None for entry in record.entries),
        verified_keyid=next(iter(keyids), None),
    )


# ------------------------------------------------------------------------------------------------
# The protocol.


def corpus_root(label: str) -> Path:
    """The folder behind a protocol's `corpus` (`builtin:v<version>` or a path)."""
    from trustbench.rtb.corpus._load import BUILTIN_VERSIONS, builtin_corpus_root

    if label.startswith("builtin:"):
        version = label.removeprefix("builtin:").removeprefix("v")
        if version not in BUILTIN_VERSIONS:
            raise InputError(f"unknown built-in corpus {label!r}", location="corpus")
        return builtin_corpus_root(version)
    return Path(label)


def _selected(
    cases: list[Any], selection: Selection, options: dict[str, Any], listed: list[str]
) -> list[str]:
    """The case ids a selection picks (`options`: sample_per_group, seed, consequential)."""
    if selection == "all":
        return sorted(case.case_id for case in cases)
    if selection == "consequential":
        chosen = options.get("consequential_decisions") or AdjudicationProtocol.model_fields[
            "consequential_decisions"
        ].get_default(call_default_factory=True)
        return sorted(
            case.case_id for case in cases if case.expectations.reference_decision.value in chosen
        )
    if selection == "listed":
        return sorted(set(listed))
    if options.get("sample_per_group") is None or options.get("seed") is None:
        raise InputError("a `sample` selection needs --per-group and --seed")
    draw = random.Random(options["seed"])
    by_group: dict[str, list[str]] = {}
    for case in cases:
        by_group.setdefault(case.group, []).append(case.case_id)
    picked = []
    for group in sorted(by_group):
        ids = sorted(by_group[group])
        picked += draw.sample(ids, min(options["sample_per_group"], len(ids)))
    return sorted(picked)


def listed_case_ids(path: Path) -> list[str]:
    """Case ids from a file: the first column of each line, skipping `#` comments and a header."""
    return [case_id for _, case_id in listed_case_rows(path)]


def listed_case_rows(path: Path) -> list[tuple[int, str]]:
    """`listed_case_ids` with the row (line number) of each, for messages that name it."""
    text = read_input_file(path).decode("utf-8", errors="replace")
    rows = []
    for row, line in enumerate(text.splitlines(), start=1):
        first = re.split(r"[\t,]", line.strip(), maxsplit=1)[0].strip()
        if first and not first.startswith("#") and first != "case_id":
            rows.append((row, first))
    return rows


def freeze_protocol(
    record_path: Path,
    corpus: str,
    *,
    selection: Selection,
    options: dict[str, Any],
    listed_file: Path | None = None,
    sign_key: Path | None = None,
) -> AdjudicationProtocol:
    """Write a new record whose first entry is the protocol, frozen against the corpus as it is.

    Args:
        record_path: The record to create; an existing file is refused (a protocol is never
            replaced).
        corpus: `builtin:v<version>` or a corpus folder.
        selection: How the cases are chosen.
        options: `sample_per_group`, `seed`, `consequential_decisions`, `reviewers_per_case`,
            `blind_second_review`, `adjudication_rule` (protocol fields; absent: defaults).
        listed_file: The case list for a `listed` selection.
        sign_key: Ed25519 private key to sign the entry with.

    Raises:
        InputError: an existing record, a listed case the corpus lacks, missing options.
        CheckFailed: the corpus does not validate.
    """
    from trustbench.rtb.corpus._load import load_corpus

    if record_path.exists():
        raise InputError(
            "already exists: a frozen protocol is never replaced", location=str(record_path)
        )
    loaded = load_corpus(corpus_root(corpus))
    rows = listed_case_rows(listed_file) if listed_file is not None else []
    listed = [case_id for _, case_id in rows]
    if selection == "listed" and not listed:
        raise InputError("a `listed` selection needs --cases-from FILE with case ids")
    known = {case.case_id for case in loaded.cases}
    for row, case_id in rows:
        if case_id not in known:
            raise InputError(f"row {row}: unknown case id {case_id!r}", location=str(listed_file))
    label = corpus if corpus.startswith("builtin:") else str(Path(corpus).resolve())
    protocol = AdjudicationProtocol(
        corpus=label,
        corpus_manifest_sha256=loaded.manifest_sha256,
        selection=selection,
        cases=_selected(list(loaded.cases), selection, options, listed),
        **{k: v for k, v in options.items() if v is not None},
    )
    body = protocol.model_dump(mode="json")
    record_path.write_bytes(_entry_lines(0, GENESIS, [("protocol", body)], sign_key))
    return protocol


# ------------------------------------------------------------------------------------------------
# Review files: TSV, CSV or JSON, one reviewer per file.

_LIST_COLUMNS = frozenset({"governing_rules", "facts_relied_on"})
_TEXT_COLUMNS = frozenset({"evidence", "notes"})
_COLUMNS = _LIST_COLUMNS | _TEXT_COLUMNS | {"case_id", "decision", "confidence"}
_COMBINED = "governing_rule_and_facts"
"""A free-text column naming the rule(s) and the facts together: its rule ids (`r4`) become
`governing_rules` and its text the `evidence`."""
_RULE_ID = re.compile(r"\br\d+\b")
_FREE_TEXT_REVIEWER = re.compile(r"Reviewer:\s*(?P<id>[^\s,]+),\s*(?P<role>.+?\.)(?=\s|$)")


def header_qualification(comments: list[str]) -> dict[str, Any]:
    """Qualification fields declared in a file's `#` header.

    Either `# reviewer_id: ID`, `# role: TEXT`, `# years: N` lines, or one sentence
    `Reviewer: ID, ROLE.` (the role runs to the first full stop).
    """
    found: dict[str, Any] = {}
    for line in comments:
        key, _, value = line.partition(":")
        if key.strip() in {"reviewer_id", "role", "years"} and value.strip():
            found[key.strip()] = value.strip()
    match = _FREE_TEXT_REVIEWER.search(" ".join(comments))
    if match is not None:
        found.setdefault("reviewer_id", match["id"])
        found.setdefault("role", match["role"].rstrip("."))
    return found


def _row_review(row: dict[str, str]) -> ReferenceReview:
    """A review from one table row (columns as `_COLUMNS`, or the combined free-text one)."""
    fields: dict[str, Any] = {}
    for column, value in row.items():
        text = (value or "").strip()
        if column in _LIST_COLUMNS:
            fields[column] = [part.strip() for part in text.split(";") if part.strip()]
        elif column == "confidence":
            fields[column] = float(text) if text else None
        elif column == _COMBINED:
            fields["governing_rules"] = list(dict.fromkeys(_RULE_ID.findall(text)))
            fields["evidence"] = text
        else:
            fields[column] = text
    return ReferenceReview.model_validate(fields)


def _bad_row(path: Path | str, row: int, what: str) -> InputError:
    return InputError(f"{path}: row {row}: {what}; nothing was recorded")


def _table_reviews(path: Path, text: str) -> tuple[list[str], list[tuple[int, ReferenceReview]]]:
    lines = text.splitlines()
    comments = [line.lstrip("#").strip() for line in lines if line.startswith("#")]
    skipped = len(lines) - len([line for line in lines if not line.startswith("#")])
    body = "\n".join(line for line in lines if not line.startswith("#"))
    reader = csv.DictReader(io.StringIO(body), delimiter="\t" if path.suffix == ".tsv" else ",")
    columns = reader.fieldnames or []
    unknown = [c for c in columns if c not in _COLUMNS and c != _COMBINED]
    if "case_id" not in columns or "decision" not in columns or unknown:
        raise _bad_row(path, skipped + 1, f"header needs case_id and decision (unknown: {unknown})")
    reviews = []
    for row in reader:
        number = skipped + reader.line_num
        if None in row or any(value is None for value in row.values()):
            raise _bad_row(path, number, f"{len(columns)} columns expected")
        try:
            reviews.append((number, _row_review(row)))
        except (ValueError, ValidationError) as error:
            raise _bad_row(path, number, first_error(error)) from None
    return comments, reviews


def first_error(error: Exception) -> str:
    """The first problem of a validation (`field.path: message`) or parse error, in one line."""
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}"
    return str(error).splitlines()[0]


def _json_reviews(
    path: Path, text: str
) -> tuple[dict[str, Any], list[tuple[int, ReferenceReview]]]:
    """A JSON review file: `{"reviewer": {qualification}, "reviews": [review, ...]}`."""
    try:
        document = loads_refusing_duplicate_keys(text)
    except ValueError as error:
        raise _bad_row(path, 0, f"not JSON ({first_error(error)})") from None
    if not isinstance(document, dict) or not isinstance(document.get("reviews"), list):
        raise _bad_row(path, 0, 'expected {"reviewer": {...}, "reviews": [...]}')
    reviews = []
    for index, item in enumerate(document["reviews"], start=1):
        try:
            reviews.append((index, ReferenceReview.model_validate(item)))
        except ValidationError as error:
            raise _bad_row(path, index, first_error(error)) from None
    reviewer = document.get("reviewer") or {}
    return (reviewer if isinstance(reviewer, dict) else {}), reviews


def parse_review_file(
    path: Path, declared: dict[str, Any]
) -> tuple[Qualification, list[tuple[int, ReferenceReview]]]:
    """One reviewer's reviews from a TSV, CSV or JSON file, with their qualification.

    Args:
        path: The file (`.tsv`, `.csv` or `.json`).
        declared: Qualification fields given as options; they win over the file's header.

    Raises:
        InputError: naming the file and row: a malformed row, a missing column, no declared
            reviewer id or role.
    """
    text = read_input_file(path).decode("utf-8", errors="replace")
    if path.suffix == ".json":
        header, reviews = _json_reviews(path, text)
    elif path.suffix in {".tsv", ".csv"}:
        comments, reviews = _table_reviews(path, text)
        header = header_qualification(comments)
    else:
        raise InputError("review files are .tsv, .csv or .json", location=str(path))
    fields = {**header, **{k: v for k, v in declared.items() if v is not None}}
    try:
        qualification = Qualification.model_validate(fields)
    except ValidationError as error:
        raise InputError(
            f"{path}: header: reviewer qualification {first_error(error)} (declare reviewer_id, "
            "role and years in the header or with --reviewer-id/--role/--years)"
        ) from None
    return qualification, reviews


_YES_NO = {"yes": True, "true": True, "no": False, "false": False}


def declared_blind(path: Path) -> bool:
    """Whether a review file declares its reviews blind, as its header says.

    Blind: made without seeing candidate verdicts, the label or other reviews. Declared by a
    `# blind: yes|no` header line, or `"blind": true|false` in a JSON file; not declared reads
    False.

    Raises:
        InputError: naming the file when the declaration is neither yes nor no.
    """
    text = read_input_file(path).decode("utf-8", errors="replace")
    if path.suffix == ".json":
        document = loads_refusing_duplicate_keys(text)
        value = document.get("blind", False) if isinstance(document, dict) else False
        if not isinstance(value, bool):
            raise InputError(f'{path}: "blind" must be true or false, not {value!r}')
        return value
    for line in text.splitlines():
        key, _, value = line.lstrip("#").partition(":")
        if line.startswith("#") and key.strip() == "blind":
            if value.strip().lower() not in _YES_NO:
                raise InputError(f"{path}: header: blind must be yes or no, not {value.strip()!r}")
            return _YES_NO[value.strip().lower()]
    return False


# ------------------------------------------------------------------------------------------------
# Import.


def loaded_corpus(record: AdjudicationRecord, corpus: Path | None) -> Any:
    """The corpus the protocol froze (or the one an `apply` wrote), refusing any other."""
    from trustbench.rtb.corpus._load import load_corpus

    loaded = load_corpus(corpus if corpus is not None else corpus_root(record.protocol.corpus))
    if loaded.manifest_sha256 not in record.accepted_manifests():
        raise CheckFailed(
            f"{loaded.root}/MANIFEST.json: sha256 {loaded.manifest_sha256[:16]}... is not the "
            f"manifest the protocol in {record.path} froze "
            f"({record.protocol.corpus_manifest_sha256[:16]}...) nor one its `apply` wrote"
        )
    return loaded


def _checked_reviews(
    record: AdjudicationRecord,
    path: Path | str,
    qualification: Qualification,
    reviews: list[tuple[int, ReferenceReview]],
    known: set[str],
) -> None:
    """Refuse unknown cases, cases outside the protocol and a second review by one reviewer."""
    frozen = set(record.protocol.cases)
    done = {
        r.review.case_id: r.source
        for r in record.reviews()
        if r.qualification.reviewer_id == qualification.reviewer_id
    }
    for row, review in reviews:
        if review.case_id not in known:
            raise _bad_row(path, row, f"unknown case id {review.case_id!r}")
        if review.case_id not in frozen:
            raise _bad_row(path, row, f"case {review.case_id} is outside the frozen protocol")
        if review.case_id in done:
            raise _bad_row(
                path,
                row,
                f"{qualification.reviewer_id} already reviewed {review.case_id} "
                f"({done[review.case_id]}); a review is never replaced",
            )
        done[review.case_id] = f"{Path(path).name}:{row}"


def import_reviews(
    record_path: Path,
    review_file: Path,
    *,
    declared: dict[str, Any],
    corpus: Path | None = None,
    sign_key: Path | None = None,
    blind: bool | None = None,
) -> tuple[Qualification, int]:
    """Append one reviewer's reviews to the record, all or none.

    Args:
        record_path: The record (verified first).
        review_file: TSV, CSV or JSON with one row per case.
        declared: Qualification fields given as options (`reviewer_id`, `role`, `years`).
        corpus: The corpus folder when not where the protocol names it.
        sign_key: Ed25519 private key to sign each entry with.
        blind: Whether the reviews were made blind, as the importer declares it; None: as the
            file declares it (`declared_blind`).

    Returns:
        The reviewer's qualification and the number of reviews recorded.
    """
    record = read_record(record_path)
    qualification, reviews = parse_review_file(review_file, declared)
    made_blind = declared_blind(review_file) if blind is None else blind
    loaded = loaded_corpus(record, corpus)
    count = record_reviews(
        record, loaded, review_file, qualification, reviews, sign_key, blind=made_blind
    )
    return qualification, count


def record_reviews(
    record: AdjudicationRecord,
    loaded: Any,
    source: Path | str,
    qualification: Qualification,
    reviews: list[tuple[int, ReferenceReview]],
    sign_key: Path | None = None,
    blind: bool = False,
) -> int:
    """Check one reviewer's reviews and append them, all or none.

    The one path every review takes into the record, whether imported from a file or submitted
    in `rtb adjudicate serve`, so both refuse the same things with the same words.

    Args:
        record: The verified record (read just before: the append continues its head).
        loaded: The corpus the record vouches for (`loaded_corpus`).
        source: The file the reviews come from, or the app's name for its form; errors name it
            and each entry records `NAME:row`.
        qualification: The reviewer's declared qualification.
        reviews: (row, review) pairs.
        sign_key: Ed25519 private key to sign each entry with.
        blind: Whether the reviews were made blind (declared by the importer; the web app shows
            a reviewer nothing but the case and the policy, so its reviews are).

    Returns:
        The number of reviews recorded.

    Raises:
        InputError: an unknown case, a case outside the protocol, a second review of a case by
            this reviewer (naming the source and row); nothing is recorded.
    """
    _checked_reviews(record, source, qualification, reviews, {c.case_id for c in loaded.cases})
    items: list[tuple[EntryKind, dict[str, Any]]] = [
        (
            "review",
            {**_review_body(qualification, review, f"{Path(source).name}:{row}"), "blind": blind},
        )
        for row, review in reviews
    ]
    if items:
        _append(record, items, sign_key)
    return len(items)


def _review_body(
    qualification: Qualification, review: ReferenceReview, source: str
) -> dict[str, Any]:
    """The body of a review or adjudication entry: who, what, from where."""
    return {
        "qualification": qualification.model_dump(mode="json"),
        "review": review.model_dump(mode="json"),
        "source": source,
    }


def awaiting_adjudication(record: AdjudicationRecord, loaded: Any) -> list[str]:
    """The cases an adjudicator has to settle: all reviews in, not all agreeing with the label.

    Empty unless the protocol's rule is `adjudicated`; a case already adjudicated is left out.
    """
    if record.protocol.adjudication_rule != "adjudicated":
        return []
    settled = record.adjudications()
    return [
        case_id
        for case_id, status in record.statuses(_labels(loaded)).items()
        if status == "disputed" and case_id not in settled
    ]


def record_adjudication(
    record: AdjudicationRecord,
    loaded: Any,
    source: str,
    adjudicator: Qualification,
    adjudication: ReferenceReview,
    sign_key: Path | None = None,
) -> None:
    """Append an adjudicator's decision on one disagreement (the reviews stay as they are).

    Raises:
        InputError: the protocol's rule is not `adjudicated`, the case is outside it, has no
            disagreement awaiting adjudication (reviews missing, all agreeing with the label,
            or already adjudicated), or the adjudicator reviewed it; nothing is recorded.
    """
    case_id, rule = adjudication.case_id, record.protocol.adjudication_rule
    if rule != "adjudicated":
        raise InputError(
            f"{source}: the protocol's rule is {rule}: a disagreement is settled by that rule, "
            "not by an adjudicator; nothing was recorded"
        )
    if case_id not in record.protocol.cases:
        raise InputError(f"{source}: case {case_id} is outside the frozen protocol")
    own = record.reviews_by_case()[case_id]
    if adjudicator.reviewer_id in {r.qualification.reviewer_id for r in own}:
        raise InputError(
            f"{source}: {adjudicator.reviewer_id} reviewed {case_id} and cannot adjudicate it; "
            "nothing was recorded"
        )
    if case_id not in awaiting_adjudication(record, loaded):
        raise InputError(
            f"{source}: case {case_id} has no disagreement awaiting adjudication (reviews "
            "missing, all agreeing with the label, or adjudicated already: an adjudication "
            "is never replaced); nothing was recorded"
        )
    body = _review_body(adjudicator, adjudication, source)
    _append(record, [("adjudication", body)], sign_key)


# ------------------------------------------------------------------------------------------------
# Report and statuses.


def case_status(
    protocol: AdjudicationProtocol,
    reference: str,
    decisions: list[str],
    adjudicated: str | None = None,
) -> CaseStatus:
    """A case's status under the protocol's rule, from its reviews' decisions.

    `adjudicated` (the adjudicator's decision, None: none yet) counts only under the
    `adjudicated` rule and only where the reviews do not all agree with the label.
    """
    if len(decisions) < protocol.reviews_needed(reference):
        return "pending"
    agreeing = sum(decision == reference for decision in decisions)
    if agreeing == len(decisions):
        return "reviewed"
    if protocol.adjudication_rule == "majority":
        return "reviewed" if agreeing * 2 > len(decisions) else "disputed"
    if protocol.adjudication_rule == "adjudicated" and adjudicated == reference:
        return "reviewed"
    return "disputed"


def review_requirement(
    protocol: AdjudicationProtocol, reference: str, own: list[RecordedReview]
) -> dict[str, Any]:
    """Whether a case's reviews are the ones the frozen protocol asks for, and if not, why.

    Each reviewer reviews a case at most once (`import` refuses a second), so every review is
    an independent one. Where the protocol asks for blind second review of consequential cases,
    only reviews declared blind count towards them: a review made after seeing candidate
    verdicts is kept and shown, but cannot make the case `reviewed` or `disputed`.
    """
    needed = protocol.reviews_needed(reference)
    consequential = reference in protocol.consequential_decisions
    blind_required = consequential and protocol.blind_second_review
    blind = sum(r.blind for r in own)
    counted = blind if blind_required else len(own)
    reason = None
    if counted < needed:
        kind = "independent blind reviews (consequential case)" if blind_required else "reviews"
        reason = f"needs {needed} {kind}; has {len(own)}, {blind} declared blind"
    return {
        "consequential": consequential,
        "reviews_needed": needed,
        "independent_reviews": len(own),
        "blind_required": blind_required,
        "declared_blind": {r.qualification.reviewer_id: r.blind for r in own},
        "met": reason is None,
        "pending_reason": reason,
    }


def status_under_protocol(
    protocol: AdjudicationProtocol,
    reference: str,
    own: list[RecordedReview],
    adjudicated: str | None = None,
) -> CaseStatus:
    """A case's status: `pending` until its reviews meet the protocol, then by its rule."""
    if not review_requirement(protocol, reference, own)["met"]:
        return "pending"
    return case_status(protocol, reference, [r.review.decision for r in own], adjudicated)


def rationale_of(recorded: RecordedReview) -> dict[str, Any]:
    """A review's (or an adjudication's) decision and grounds, for the report and the app."""
    review = recorded.review
    return {
        "reviewer": recorded.qualification.reviewer_id,
        "qualification": recorded.qualification.text(),
        "decision": review.decision,
        "governing_rules": review.governing_rules,
        "facts_relied_on": review.facts_relied_on,
        "evidence": review.evidence,
        "confidence": review.confidence,
        "notes": review.notes,
        "source": recorded.source,
        "blind": recorded.blind,
    }


def _kappa(first: list[str], second: list[str]) -> dict[str, Any]:
    """Cohen's kappa as the reviewer track records it (a non-finite standard error as null)."""
    from trustbench.core.stats import agreement_table
    from trustbench.rtb.review._analysis import _kappa_record  # pyright: ignore[reportPrivateUsage]

    return _kappa_record(agreement_table(first, second, DECISIONS), 0.95)


def _inter_reviewer(
    by_case: dict[str, list[RecordedReview]], reviewers: list[str]
) -> dict[str, Any]:
    """Cohen's kappa for two reviewers, Fleiss' for more, on the cases all of them reviewed."""
    if len(reviewers) < 2:
        return {"method": None, "not_established": "one reviewer: no inter-reviewer agreement"}
    joint = [
        {r.qualification.reviewer_id: r.review.decision for r in reviews}
        for reviews in by_case.values()
    ]
    joint = [decisions for decisions in joint if set(reviewers) <= set(decisions)]
    if len(reviewers) == 2:
        first, second = reviewers
        result = _kappa([d[first] for d in joint], [d[second] for d in joint])
        method = "cohens_kappa"
    else:
        import numpy as np

        from trustbench.core.stats import fleiss_kappa

        counts = np.array([[list(d.values()).count(c) for c in DECISIONS] for d in joint])
        table = counts.reshape(len(joint), len(DECISIONS))
        result = fleiss_kappa(table).model_dump(mode="json")
        method = "fleiss_kappa"
    return {
        "method": method,
        "reviewers": reviewers,
        **result,
        "not_established": result.get("not_computable"),
    }


def _per_reviewer(reviews: list[RecordedReview], labels: dict[str, str]) -> list[dict[str, Any]]:
    """Each reviewer's agreement with the authored labels, with kappa against them."""
    rows = []
    for reviewer_id in dict.fromkeys(r.qualification.reviewer_id for r in reviews):
        own = [r for r in reviews if r.qualification.reviewer_id == reviewer_id]
        decisions = [r.review.decision for r in own]
        reference = [labels[r.review.case_id] for r in own]
        kappa = _kappa(reference, decisions)
        rows.append(
            {
                "reviewer": reviewer_id,
                "qualification": own[0].qualification.model_dump(mode="json"),
                "cases": len(own),
                "agree_with_label": sum(a == b for a, b in zip(decisions, reference, strict=True)),
                "kappa_vs_labels": {**kappa, "not_established": kappa.get("not_computable")},
            }
        )
    return rows


def _labels(loaded: Any) -> dict[str, str]:
    """Case id -> authored reference decision."""
    return {c.case_id: c.expectations.reference_decision.value for c in loaded.cases}


def adjudication_report(record_path: Path, corpus: Path | None = None) -> dict[str, Any]:
    """Per case agreement with the label, per reviewer kappa vs labels, inter-reviewer kappa.

    Every disagreement (between reviewers, or with the label) is listed with each reviewer's
    rationale; nothing is averaged away.
    """
    record = read_record(record_path)
    loaded = loaded_corpus(record, corpus)
    labels = _labels(loaded)
    reviews = record.reviews()
    by_case = record.reviews_by_case()
    statuses = record.statuses(labels)
    adjudications = record.adjudications()
    cases = []
    for case_id, own in by_case.items():
        decisions = [r.review.decision for r in own]
        adjudication = adjudications.get(case_id)
        cases.append(
            {
                "case_id": case_id,
                "label": labels[case_id],
                "status": statuses[case_id],
                "requirement": review_requirement(record.protocol, labels[case_id], own),
                "decisions": {r.qualification.reviewer_id: r.review.decision for r in own},
                "agrees_with_label": bool(own) and all(d == labels[case_id] for d in decisions),
                "rationales": [rationale_of(r) for r in own],
                "adjudication": None if adjudication is None else rationale_of(adjudication),
            }
        )
    reviewers = list(dict.fromkeys(r.qualification.reviewer_id for r in reviews))
    return {
        "record": str(record.path),
        "record_sha256": record.head,
        "protocol": record.protocol.model_dump(mode="json"),
        "status_counts": dict(Counter(case["status"] for case in cases)),
        "reviewers": _per_reviewer(reviews, labels),
        "inter_reviewer": _inter_reviewer(by_case, reviewers),
        "cases": cases,
        "disagreements": [
            case for case in cases if case["rationales"] and not _unanimous_with_label(case)
        ],
        "awaiting_adjudication": awaiting_adjudication(record, loaded),
        "cases_outside_protocol": len(labels) - len(by_case),
    }


def _unanimous_with_label(case: dict[str, Any]) -> bool:
    return all(decision == case["label"] for decision in case["decisions"].values())


def _kappa_text(result: dict[str, Any]) -> str:
    if result.get("kappa") is None:
        return f"not established ({result.get('not_established') or 'not computable'})"
    interval = result.get("interval") or {}
    low, high = interval.get("lower"), interval.get("upper")
    bounds = (
        ", interval not established (standard error not finite)"
        if low is None
        else f", 95% interval {low:.3f} to {high:.3f}"
    )
    return f"{result['kappa']:.3f} (n = {result['cases']} cases{bounds})"


def report_text(report: dict[str, Any]) -> str:
    """The report for people: counts, each reviewer, agreement, every disagreement."""
    protocol = report["protocol"]
    counts = report["status_counts"]
    lines = [
        f"adjudication record {report['record']} (head {report['record_sha256'][:16]}...)",
        f"corpus {protocol['corpus']}: {len(protocol['cases'])} case(s) under review "
        f"({protocol['selection']}), {report['cases_outside_protocol']} outside the protocol; "
        + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())),
    ]
    for row in report["reviewers"]:
        qualification = Qualification.model_validate(row["qualification"])
        lines.append(f"reviewer {qualification.text()}")
        lines.append(
            f"  agreement with the authored labels: {row['agree_with_label']}/{row['cases']}; "
            f"Cohen's kappa vs labels {_kappa_text(row['kappa_vs_labels'])}"
        )
    inter = report["inter_reviewer"]
    method = {"cohens_kappa": "Cohen's kappa", "fleiss_kappa": "Fleiss' kappa"}.get(
        inter["method"] or "", "kappa"
    )
    lines.append(f"inter-reviewer {method}: {_kappa_text(inter)}")
    awaiting = report.get("awaiting_adjudication", [])
    lines.append(
        f"disagreements: {len(report['disagreements'])}"
        + (f" ({len(awaiting)} awaiting adjudication)" if awaiting else "")
    )
    for case in report["disagreements"]:
        lines.append(f"  {case['case_id']}: label {case['label']}, status {case['status']}")
        for rationale in case["rationales"]:
            lines.append(f"    {_rationale_text(rationale)}")
        if case.get("adjudication"):
            lines.append(f"    adjudicated by {_rationale_text(case['adjudication'])}")
    return "\n".join(lines + _blind_review_lines(report["cases"]))


def _blind_review_lines(cases: list[dict[str, Any]]) -> list[str]:
    """Per consequential case under blind second review: its reviews, which were blind, status."""
    under = [case for case in cases if case["requirement"]["blind_required"]]
    if not under:
        return []
    met = sum(case["requirement"]["met"] for case in under)
    lines = [
        f"consequential cases under blind second review: {len(under)}; "
        f"{met} have the independent blind reviews they need"
    ]
    for case in under:
        requirement = case["requirement"]
        blind = ", ".join(
            f"{reviewer} {'blind' if flag else 'NOT declared blind'}"
            for reviewer, flag in requirement["declared_blind"].items()
        )
        outcome = requirement["pending_reason"] or "requirement met"
        lines.append(
            f"  {case['case_id']}: {requirement['independent_reviews']}/"
            f"{requirement['reviews_needed']} independent review(s) ({blind or 'none yet'}); "
            f"{case['status']}: {outcome}"
        )
    return lines


def _rationale_text(rationale: dict[str, Any]) -> str:
    rules = ", ".join(rationale["governing_rules"]) or "no rule named"
    return (
        f"{rationale['reviewer']}: {rationale['decision']} ({rules}): "
        f"{rationale['evidence'] or rationale['notes']}"
    )


# ------------------------------------------------------------------------------------------------
# Apply: the record becomes each case's `reference_status` and a new MANIFEST.


def _differing_text(recorded: RecordedReview, label: str) -> str:
    """One preserved disagreement: who decided what against the label, and on what."""
    review = recorded.review
    return (
        f"{recorded.qualification.reviewer_id}: {review.decision} where the label is {label} "
        f"(rules: {', '.join(review.governing_rules) or 'none named'}; {review.evidence}"
        + (f"; {review.notes}" if review.notes else "")
        + ")"
    )


def _reference_status(
    status: CaseStatus,
    own: list[RecordedReview],
    adjudication: RecordedReview | None,
    label: str,
    stamp: tuple[str, str],
) -> dict[str, Any]:
    """A case's `reference_status`; `stamp` is the record's head and the day it is applied.

    An adjudication is kept beside the reviews: its author is listed after the reviewers (their
    qualification marked `adjudicator`), and its decision and grounds are kept with the
    disagreements it settled, whether it upheld the label or not.
    """
    record_sha256, day = stamp
    disagreements = [_differing_text(r, label) for r in own if r.review.decision != label]
    reviewers = [r.qualification.reviewer_id for r in own]
    qualifications = [r.qualification.text() for r in own]
    if adjudication is not None:
        verdict = "upholds" if adjudication.review.decision == label else "does not uphold"
        disagreements.append(
            f"adjudicated: {verdict} the label; " + _differing_text(adjudication, label)
        )
        reviewers.append(adjudication.qualification.reviewer_id)
        qualifications.append(f"adjudicator {adjudication.qualification.text()}")
    return {
        "status": "authored" if status == "pending" else status,
        "review": "pending_independent_domain_review"
        if status == "pending"
        else "independently_reviewed",
        "reviewers": reviewers,
        "disagreements": disagreements,
        "qualifications": qualifications,
        "reviewed_on": day,
        "record_sha256": record_sha256,
    }


def _case_text(document: dict[str, Any]) -> str:
    """A case file's text as the corpus writes it."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _rewritten_cases(record: AdjudicationRecord, loaded: Any) -> dict[Path, str]:
    """New text of each reviewed or disputed case file whose status changes."""
    labels = _labels(loaded)
    statuses = record.statuses(labels)
    adjudications = record.adjudications()
    stamp = (record.head, utc_now()[:10])
    changed = {}
    for case_id, own in sorted(record.reviews_by_case().items()):
        status = statuses[case_id]
        if status == "pending":
            continue
        path = loaded.root / "cases" / f"{case_id}.json"
        document = json.loads(path.read_text(encoding="utf-8"))
        document["reference_status"] = _reference_status(
            status, own, adjudications.get(case_id), labels[case_id], stamp
        )
        changed[path] = _case_text(document)
    return changed


def apply_record(
    record_path: Path, corpus: Path | None = None, sign_key: Path | None = None
) -> dict[str, Any]:
    """Write each reviewed or disputed case's `reference_status`, then a new MANIFEST.

    The corpus must be the one the protocol froze (or one an earlier `apply` of this record
    wrote). The MANIFEST is written by `write_manifest`, which validates the corpus first; if
    that fails, every case file is put back as it was. The record gains an `applied` entry
    naming the manifest before and after.

    Returns:
        The status counts, the record hash applied and both manifests' hashes.
    """
    from trustbench.rtb.corpus._load import write_manifest

    if sign_key is not None:
        load_private_key(sign_key)  # a bad key is refused before any case file is written
    record = read_record(record_path)
    loaded = loaded_corpus(record, corpus)
    changed = _rewritten_cases(record, loaded)
    originals = {path: path.read_bytes() for path in changed}
    try:
        for path, text in changed.items():
            path.write_text(text, encoding="utf-8")
        write_manifest(loaded.root)
    except BaseException:
        for path, data in originals.items():
            path.write_bytes(data)
        raise
    after = sha256_hex((loaded.root / "MANIFEST.json").read_bytes())
    labels = _labels(loaded)
    counts = Counter(record.statuses(labels).values())
    summary = {
        "record_sha256": record.head,
        "manifest_sha256_before": loaded.manifest_sha256,
        "manifest_sha256_after": after,
        "status_counts": dict(sorted(counts.items())),
        "cases_written": len(changed),
        "cases_outside_protocol": len(labels) - len(record.protocol.cases),
    }
    _append(record, [("applied", summary)], sign_key)
    return summary
