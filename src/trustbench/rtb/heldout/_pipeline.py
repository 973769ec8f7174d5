"""How `trustbench freeze` / `run` / `report` treat a sealed held-out set used as a corpus.

- `freeze` (`on_freeze`, before the manifest is written): needs the set's exposure key
  (`$TRUSTBENCH_HELDOUT_EXPOSURE_KEY`, or the owner's key); refuses a tampered or retired set,
  and one whose runs reached its budget unless `freeze --reason` (or `heldout_reason` in
  `[track_options]`) says why; otherwise the freeze is appended to the exposure log, naming the
  experiment by its manifest hash.
- `run` (`before_run`): before any trial, an authenticated `run` entry is appended and fsynced
  (who froze it, who runs it, candidates and their code hashes, trials) and kept in the run
  folder too; every run counts (a resume, a re-frozen copy of the same spec), a retired set
  refuses every run, and a run refused before that (an altered ledger, an unreachable Ray
  address) appends nothing.
- `report` (`analyze_sealed`): needs the owner's private key (`--heldout-key FILE` or
  `$TRUSTBENCH_HELDOUT_KEY`) and refuses without it before anything is written; it opens the
  answer key into a temporary folder, checks the count with the key (`owner_check`: the seal's
  budget and identity, every entry's authentication, the witness, this run's kept entries),
  maps each trial's exported evaluation id to its case and grades as for any corpus. The run
  folder gets the candidate's view (aggregate figures and intervals only: `candidate_view`); the
  owner's detailed report is written elsewhere by `rtb heldout report SET --run RUN --out DIR`.

Every log read and write goes through the functions below. The threat model (who holds which
key, what a custodian of the set folder can and cannot do) is in docs/held-out-sets.md.
"""

from __future__ import annotations

import base64
import dataclasses
import getpass
import hashlib
import hmac
import html
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trustbench._canonical import canonical_json, sha256_hex
from trustbench.core import ExperimentSpec, LedgerContents, Manifest, TrackAnalysis
from trustbench.core.report import TextBlock
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.corpus._load import Corpus, load_corpus
from trustbench.rtb.heldout._corpus import SealedSet, is_sealed_set
from trustbench.rtb.heldout._crypto import EXPOSURE_PREFIX, KEY_ENV, PRIVATE_PREFIX
from trustbench.rtb.heldout._seal import CLEAR_FILES, open_set

# ------------------------------------------------------------------------------------------------
# The exposure log of a held-out set: append-only, hash-chained, authenticated, kept in the set
# folder.
#
# This module is the one place that reads, checks and appends to the log: `rtb heldout freeze`,
# `rtb retire` and the pipeline hooks (`trustbench freeze` / `run` against a sealed corpus, below)
# all go through it.
#
# Each line of `exposure.jsonl` is one canonical-JSON entry: `seq`, `kind` (`freeze` for an
# experiment frozen against the set, `run` for every `trustbench run` that shows the set's inputs
# to candidates, `retire` for a retirement), `set_id`, `candidates`, `trials`, `at`, `by`,
# `reason`, optionally `experiment` (the frozen manifest's SHA-256), `candidate_code` (a `run`'s
# candidate code hashes), `frozen_by` and `key_in_environment`, then `prev_hash`, `hash` =
# sha256(prev_hash || canonical entry without `hash` and `mac`) (the first entry chains from a
# hash of the set id and recipient key) and `mac` = HMAC-SHA256(exposure key, "entry:" + hash).
# `exposure.head` holds the count, the last hash and an HMAC of both. The exposure key is
# derived from the owner's private key (`_crypto.exposure_key`): the evaluation operator holds it,
# the folder's custodian does not, so a custodian can neither forge an entry nor rewrite the head
# of a truncated log. Three records outside the set folder catch what a custodian can still do
# with the folder alone (delete the log, or put back an earlier copy of it): every `run` keeps
# its authenticated entry in its run folder (`heldout_exposure.jsonl`), checked against the log
# when that run is reported; and a witness file beside each key file used
# (`<key file>.witness.json`: the entry count and last hash seen, and whether the set was
# retired) is checked before every append and at every owner's report. A run and a freeze are
# appended and fsynced before anything runs, so a run killed at any point has been counted.

LOG_NAME = "exposure.jsonl"
HEAD_NAME = "exposure.head"
RUN_RECORD_NAME = "heldout_exposure.jsonl"
"""In a run folder: the authenticated exposure entry of each `run` of that folder."""
EXPOSURE_KEY_ENV = "TRUSTBENCH_HELDOUT_EXPOSURE_KEY"
"""The set's exposure key text, or the path of its file (`rtb heldout exposure-key`)."""
WITNESS_SUFFIX = ".witness.json"


def now_utc() -> str:
    """The date and time an entry is made (UTC, to the second)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def who(by: str | None = None) -> str:
    """Who makes an entry: `by` when given, else the OS user."""
    return by or os.environ.get("USER") or getpass.getuser()


@dataclass(frozen=True)
class ExposureKey:
    """A set's exposure key, and the key file it came from (its witness file sits beside it)."""

    secret: bytes
    """The 32 bytes the log's entries and head are authenticated with."""
    source: Path | None
    """The key file read (the exposure key's or the owner's), None for key text."""

    @property
    def witness_path(self) -> Path | None:
        """`<key file>.witness.json`: what this key's holder last saw of each set's log."""
        return (
            None
            if self.source is None
            else self.source.with_name(self.source.name + WITNESS_SUFFIX)
        )


def _key_text(variable: str) -> tuple[str, Path | None]:
    """The key text in `$variable` (text, or the path of a file holding it) and its file."""
    value = os.environ.get(variable, "").strip()
    if not value or value.startswith((EXPOSURE_PREFIX, PRIVATE_PREFIX)):
        return value, None
    path = Path(value)
    try:
        return path.read_text(encoding="utf-8").strip(), path.resolve()
    except OSError as exc:
        raise InputError(f"cannot read the key file named by ${variable}: {exc}") from exc


def _parse_exposure_key(text: str, set_id: str) -> bytes:
    """The 32 secret bytes of `tbexposure:<set id>:<base64>`, refusing another set's key."""
    body = text.removeprefix(EXPOSURE_PREFIX)
    named, _, encoded = body.rpartition(":")
    if not text.startswith(EXPOSURE_PREFIX) or not named:
        raise InputError(f"${EXPOSURE_KEY_ENV} is not an exposure key ({EXPOSURE_PREFIX}...)")
    if named != set_id:
        raise InputError(
            f"the exposure key is held-out set {named}'s, not {set_id}'s",
            location=f"${EXPOSURE_KEY_ENV}",
        )
    try:
        secret = base64.b64decode(encoded, validate=True)
    except ValueError as exc:
        raise InputError(f"${EXPOSURE_KEY_ENV} is not valid base64") from exc
    if len(secret) != 32:
        raise InputError(f"${EXPOSURE_KEY_ENV} is not 32 bytes")
    return secret


def read_owner_key(key_file: Path | None = None) -> tuple[str, Path | None]:
    """The owner's private key text (`key_file`, else `$TRUSTBENCH_HELDOUT_KEY`) and its file.

    Raises:
        InputError: Neither is given, or the file cannot be read.
    """
    from trustbench.rtb.heldout._crypto import read_private_key

    if key_file is not None:
        return read_private_key(key_file), key_file.resolve()
    text, source = _key_text(KEY_ENV)
    return (text, source) if text else (read_private_key(None), None)


def owner_exposure_key(
    manifest: dict[str, Any], private: str, source: Path | None = None
) -> ExposureKey:
    """The set's exposure key derived from the owner's private key text (read from `source`)."""
    from trustbench.rtb.heldout._crypto import exposure_key

    set_id = str(manifest["set_id"])
    return ExposureKey(_parse_exposure_key(exposure_key(private, set_id), set_id), source)


def operator_exposure_key(manifest: dict[str, Any]) -> ExposureKey:
    """The exposure key a freeze, run or retirement appends with.

    `$TRUSTBENCH_HELDOUT_EXPOSURE_KEY`, else derived from the owner's key in
    `$TRUSTBENCH_HELDOUT_KEY`.

    Raises:
        InputError: Neither is set: an exposure the owner cannot authenticate is never written.
    """
    set_id = str(manifest["set_id"])
    text, source = _key_text(EXPOSURE_KEY_ENV)
    if text:
        return ExposureKey(_parse_exposure_key(text, set_id), source)
    private, source = _key_text(KEY_ENV)
    if private:
        return owner_exposure_key(manifest, private, source)
    raise InputError(
        f"held-out set {set_id}: recording an exposure needs the set's exposure key "
        f"(${EXPOSURE_KEY_ENV}, made by the owner with `trustbench rtb heldout exposure-key`); "
        "refusing without it"
    )


def _genesis(manifest: dict[str, Any]) -> str:
    return sha256_hex(
        canonical_json({"set_id": manifest["set_id"], "recipient": manifest["recipient"]})
    )


def _entry_hash(entry: dict[str, Any]) -> str:
    body = {k: v for k, v in entry.items() if k not in ("hash", "mac")}
    return sha256_hex(entry["prev_hash"].encode("ascii") + canonical_json(body))


def _mac(key: ExposureKey, text: str) -> str:
    return hmac.new(key.secret, text.encode("utf-8"), hashlib.sha256).hexdigest()


def _head_mac(key: ExposureKey, set_id: str, count: int, last_hash: str) -> str:
    return _mac(key, f"head:{set_id}:{count}:{last_hash}")


def read_log(folder: Path) -> list[dict[str, Any]]:
    """Every entry, unverified (a malformed line raises)."""
    path = folder / LOG_NAME
    if not path.exists():
        return []
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            entry = json.loads(line)
        except ValueError as exc:
            raise InputError(f"line {number} is not JSON", location=str(path)) from exc
        if not isinstance(entry, dict):
            raise InputError(f"line {number} is not an object", location=str(path))
        entries.append(entry)
    return entries


def _chain_problems(
    entries: list[dict[str, Any]], manifest: dict[str, Any], key: ExposureKey | None
) -> list[str]:
    """The first entry out of sequence, edited, or (with the key) not authenticated."""
    prev = _genesis(manifest)
    for index, entry in enumerate(entries):
        where = f"{LOG_NAME} entry {index + 1}"
        if entry.get("seq") != index + 1 or entry.get("prev_hash") != prev:
            return [f"{where}: out of sequence (dropped, inserted or reordered entry)"]
        if entry.get("set_id") != manifest["set_id"]:
            return [f"{where}: names another set"]
        try:
            ok = entry.get("hash") == _entry_hash(entry)
        except (TypeError, ValueError, AttributeError):
            ok = False
        if not ok:
            return [f"{where}: hash does not match its content (edited entry)"]
        if key is not None and entry.get("mac") != _mac(key, f"entry:{entry['hash']}"):
            return [
                f"{where}: not authenticated by the set's exposure key (an entry written "
                "without the key: forged or rewritten)"
            ]
        prev = entry["hash"]
    return []


def _head_problems(
    folder: Path, manifest: dict[str, Any], entries: list[dict[str, Any]], key: ExposureKey | None
) -> list[str]:
    """Whether `exposure.head` names the log's last entry (and, with the key, is authentic)."""
    path = folder / HEAD_NAME
    head = path.read_text(encoding="ascii").split() if path.exists() else []
    if not entries:
        return [f"{LOG_NAME} is gone but {HEAD_NAME} records entries (log deleted)"] if head else []
    last = str(entries[-1]["hash"])
    if not head:
        return [f"{HEAD_NAME} is missing while {LOG_NAME} holds {len(entries)} entries"]
    if head[:2] != [str(len(entries)), last]:
        return [f"{HEAD_NAME} does not match the log (truncated or replaced log)"]
    if key is not None and head[2:] != [_head_mac(key, manifest["set_id"], len(entries), last)]:
        return [
            f"{HEAD_NAME} was rewritten without the set's exposure key (its authentication tag "
            f"does not match the {len(entries)} entries left): a truncated log with a rewritten "
            "head"
        ]
    return []


def _witnessed(path: Path) -> dict[str, Any]:
    try:
        seen = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise InputError(f"unreadable witness file: {exc}", location=str(path)) from exc
    return seen if isinstance(seen, dict) else {}


def witness_problems(
    entries: list[dict[str, Any]], set_id: str, key: ExposureKey | None
) -> list[str]:
    """What the log lost since the key's holder last saw it (deleted, cut, retirement undone)."""
    path = key.witness_path if key is not None else None
    seen = _witnessed(path).get(set_id) if path is not None else None
    if path is None or not isinstance(seen, dict):
        return []
    count, last = int(seen.get("entries", 0)), seen.get("hash")
    problems: list[str] = []
    if seen.get("retired") and not any(e.get("kind") == "retire" for e in entries):
        problems.append(f"retirement undone: {path.name} saw set {set_id} retired")
    if len(entries) < count:
        problems.append(
            f"{LOG_NAME} holds {len(entries)} entries where the owner's side saw {count} "
            f"({path.name}): log deleted, truncated or replaced by an earlier copy"
        )
    elif count and entries[count - 1].get("hash") != last:
        problems.append(f"{LOG_NAME} entry {count} is not the one {path.name} saw: log replaced")
    return problems


def witness(entries: list[dict[str, Any]], set_id: str, key: ExposureKey) -> None:
    """Record beside the key file how far the (verified) log reached, and whether it retired."""
    path = key.witness_path
    if path is None or not entries:
        return
    seen = _witnessed(path)
    seen[set_id] = {
        "entries": len(entries),
        "hash": entries[-1]["hash"],
        "retired": any(e.get("kind") == "retire" for e in entries),
    }
    temp = path.with_name(path.name + ".tmp")
    try:
        temp.write_text(json.dumps(seen, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(temp, path)
    except OSError as exc:  # a witness that cannot be kept would let a rollback pass unseen
        raise InputError(
            f"cannot keep the exposure witness beside the key file: {exc}", location=str(path)
        ) from exc


def log_problems(
    folder: Path, manifest: dict[str, Any], key: ExposureKey | None = None
) -> list[str]:
    """Why the exposure log cannot be trusted (empty: the chain and its head are intact).

    Without the key only the chain and the head's count are checked (`rtb heldout verify`);
    with it, every entry's and the head's authentication tag and the key's witness too.
    """
    try:
        entries = read_log(folder)
    except InputError as exc:
        return [f"{LOG_NAME}: {exc}"]
    problems = _chain_problems(entries, manifest, key)
    problems = problems or _head_problems(folder, manifest, entries, key)
    return problems + witness_problems(entries, str(manifest["set_id"]), key)


def append_entry(
    folder: Path,
    manifest: dict[str, Any],
    *,
    key: ExposureKey,
    kind: str,
    candidates: list[str],
    trials: int,
    at: str,
    by: str,
    reason: str = "",
    **extra: Any,
) -> dict[str, Any]:
    """Append one authenticated entry (refusing to extend a broken log); fsync it, then the head.

    `extra` adds fields (`experiment`, `frozen_by`, `candidate_code`); they are chained too.
    """
    problems = log_problems(folder, manifest, key)
    if problems:
        raise InputError("exposure log tampered; refusing to append: " + "; ".join(problems))
    entries = read_log(folder)
    prev = entries[-1]["hash"] if entries else _genesis(manifest)
    entry: dict[str, Any] = {
        "seq": len(entries) + 1,
        "kind": kind,
        "set_id": manifest["set_id"],
        "candidates": sorted(candidates),
        "trials": trials,
        "at": at,
        "by": by,
        "reason": reason,
        **extra,
        "prev_hash": prev,
    }
    entry["hash"] = _entry_hash(entry)
    entry["mac"] = _mac(key, f"entry:{entry['hash']}")
    _append_line(folder / LOG_NAME, canonical_json(entry) + b"\n")
    temp = folder / (HEAD_NAME + ".tmp")
    head = _head_mac(key, manifest["set_id"], entry["seq"], entry["hash"])
    temp.write_text(f"{entry['seq']} {entry['hash']} {head}\n", encoding="ascii")
    os.replace(temp, folder / HEAD_NAME)
    witness([*entries, entry], str(manifest["set_id"]), key)
    return entry


def _append_line(path: Path, line: bytes) -> None:
    """Append one line and fsync it before returning (an entry outlives a killed process)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def exposure_summary(
    folder: Path, manifest: dict[str, Any], key: ExposureKey | None = None
) -> dict[str, Any]:
    """Runs so far, their distinct candidate code, the budget, over-budget reasons, retirement."""
    problems = log_problems(folder, manifest, key)
    entries = [] if problems else read_log(folder)
    runs = [e for e in entries if e["kind"] == "run"]
    retired = next((e for e in entries if e["kind"] == "retire"), None)
    code = sorted({str(h) for e in runs for h in e.get("candidate_code", [])})
    return {
        "set_id": manifest["set_id"],
        "case_count": manifest["case_count"],
        "runs": len(runs),
        "experiments": len({e.get("experiment") for e in runs}),
        "distinct_candidate_code": len(code),
        "candidate_code": code,
        "budget": manifest["budget"],
        "over_budget_reasons": [e["reason"] for e in runs[manifest["budget"] :]],
        "retired": retired is not None,
        "retired_reason": retired["reason"] if retired else None,
        "retired_at": retired["at"] if retired else None,
        "log_authenticated": key is not None and not problems,
        "log_problems": problems,
        # Whether any run had the owner's key in its environment (in-process candidates share it).
        "answer_key_available_to_candidate": any(
            e["kind"] == "run" and e.get("key_in_environment") == "yes" for e in entries
        ),
        "public_matches": manifest.get("public_matches", []),
        "withheld": manifest.get("withheld", ""),
    }


def refuse_exposure(summary: dict[str, Any], reason: str) -> None:
    """Refuse to expose a tampered or retired set, or one whose runs reached the budget unreasoned.

    Raises:
        InputError: Naming the set and what is missing (a `--reason`, or the log repaired).
    """
    set_id = summary["set_id"]
    if summary["log_problems"]:
        raise InputError("exposure log tampered: " + "; ".join(summary["log_problems"]))
    if summary["retired"]:
        raise InputError(
            f"held-out set {set_id} is retired ({summary['retired_reason']}); "
            "it can no longer serve as a held-out set: no experiment runs against it"
        )
    if summary["runs"] >= summary["budget"] and not reason.strip():
        raise InputError(
            f"held-out set {set_id} has been run {summary['runs']} times (budget "
            f"{summary['budget']}); give a reason to expose it past the budget (freeze "
            "--reason, or heldout_reason in the spec's [track_options])"
        )


def _frozen_entry(folder: Path, experiment: str) -> dict[str, Any] | None:
    """The `freeze` entry that recorded the experiment `experiment`, if any."""
    return next(
        (
            e
            for e in read_log(folder)
            if e["kind"] == "freeze" and experiment and e.get("experiment") == experiment
        ),
        None,
    )


def freeze_against(
    folder: Path,
    manifest: dict[str, Any],
    *,
    key: ExposureKey,
    candidates: list[str],
    trials: int,
    at: str,
    by: str,
    reason: str = "",
    experiment: str = "",
) -> dict[str, Any]:
    """Record one experiment frozen against the set; refused retired, tampered or unreasoned.

    An `experiment` (a frozen manifest's hash) already recorded is not recorded again; its
    recorded reason stands for it. Returns the entry that records it. The budget counts runs
    (`record_run`): a freeze shows nothing to a candidate.
    """
    summary = exposure_summary(folder, manifest, key)
    counted = None if summary["log_problems"] else _frozen_entry(folder, experiment)
    refuse_exposure(summary, reason or (str(counted["reason"]) if counted else ""))
    if counted is not None:
        return counted
    extra = {"experiment": experiment} if experiment else {}
    return append_entry(
        folder, manifest, key=key, kind="freeze", candidates=candidates, trials=trials, at=at,
        by=by, reason=reason, **extra,
    )  # fmt: skip


def record_run(
    folder: Path,
    manifest: dict[str, Any],
    *,
    key: ExposureKey,
    experiment: str,
    candidates: list[str],
    candidate_code: list[str],
    trials: int,
    at: str,
    by: str,
    reason: str = "",
    key_in_environment: str = "no",
) -> dict[str, Any]:
    """Record one `run` of a frozen experiment before any of its trials starts.

    Every run counts, a resume and a re-frozen copy of the same spec included: each shows the
    set's inputs to candidates again. A retired set refuses every run, of experiments frozen
    before the retirement too. An experiment frozen elsewhere is recorded now.
    """
    frozen = freeze_against(folder, manifest, key=key, candidates=candidates, trials=trials,
                            at=at, by=by, reason=reason, experiment=experiment)  # fmt: skip
    return append_entry(
        folder, manifest, key=key, kind="run", candidates=candidates, trials=trials, at=at,
        by=by, reason=reason or frozen["reason"], experiment=experiment,
        frozen_by=frozen["by"], candidate_code=sorted(set(candidate_code)),
        key_in_environment=key_in_environment,
    )  # fmt: skip


def keep_run_record(run_dir: Path, entry: dict[str, Any]) -> None:
    """Keep a run's authenticated entry in its run folder, for the owner's report to find."""
    _append_line(run_dir / RUN_RECORD_NAME, canonical_json(entry) + b"\n")


def _kept_lines(path: Path, set_id: str | None) -> list[tuple[int, str]]:
    """The numbered lines of a run's kept entries; with `set_id`, those of other sets left out.

    A TRB run over two sealed transfer splits keeps both splits' entries in one file; each
    split's report checks its own (a line that is not JSON is kept: it fails authentication).
    """
    lines = list(enumerate(path.read_text(encoding="utf-8").splitlines(), 1))
    if set_id is None:
        return lines

    def other_set(line: str) -> bool:
        try:
            entry = json.loads(line)
        except ValueError:
            return False
        return isinstance(entry, dict) and entry.get("set_id") not in (None, set_id)

    return [(number, line) for number, line in lines if not other_set(line)]


def run_record_problems(
    run_dir: Path | None, folder: Path, key: ExposureKey, set_id: str | None = None
) -> list[str]:
    """Each run of `run_dir` whose authenticated entry is not in the set's log as it was kept."""
    if run_dir is None:
        return []
    path = run_dir / RUN_RECORD_NAME
    kept_lines = _kept_lines(path, set_id) if path.is_file() else []
    if not kept_lines:
        return [f"the run folder holds no {RUN_RECORD_NAME}: its runs were never recorded"]
    logged = {e.get("seq"): e.get("hash") for e in read_log(folder)}
    problems = []
    for number, line in kept_lines:
        kept: dict[str, Any] = {}
        try:
            kept = json.loads(line)
            authentic = kept["mac"] == _mac(key, f"entry:{kept['hash']}")
        except (ValueError, KeyError, TypeError):
            authentic = False
        if not authentic:
            problems.append(f"{RUN_RECORD_NAME} line {number}: not authenticated")
        elif logged.get(kept["seq"]) != kept["hash"]:
            problems.append(
                f"this run's exposure entry {kept['seq']} (kept in the run folder) is not in "
                f"{LOG_NAME}, which holds {len(logged)} entries: the log was deleted, truncated "
                "or replaced by a copy"
            )
    return problems


# ------------------------------------------------------------------------------------------------
# What a report says about a held-out set: what was withheld, why, how often it was exposed.


def _exposure_text(summary: dict[str, Any]) -> str:
    return (
        f"held-out set {summary['set_id']}: run {summary['runs']} times (budget "
        f"{summary['budget']}) by {summary['distinct_candidate_code']} distinct candidate code"
    )


def verdict_line(summary: dict[str, Any]) -> str:
    """The verdict line; a retired or tampered set says so first, so it never reads as held out."""
    if summary["log_problems"]:
        return f"VERDICT: held-out set {summary['set_id']}: exposure log TAMPERED; not trustworthy"
    head = _exposure_text(summary)
    if summary["public_matches"]:
        head += f"; {len(summary['public_matches'])} cases MATCH A PUBLIC CORPUS (sealed --force)"
    if summary["retired"]:
        return f"VERDICT: RETIRED (exposed: {summary['retired_reason']}); {head}; not held out"
    if summary["runs"] > summary["budget"]:
        return f"VERDICT: OVER BUDGET; {head}"
    return f"VERDICT: {head}"


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """Plain-text lines for the terminal report."""
    lines = [
        verdict_line(summary),
        _exposure_text(summary),
        f"cases: {summary['case_count']}",
        f"withheld: {summary['withheld']}",
        "answer key available to the candidate's side: "
        + (
            "YES: the owner's key was within a candidate's reach in a run of this experiment "
            "(an unconfined candidate with the key in its environment, or a key file its sandbox "
            "could read)"
            if summary["answer_key_available_to_candidate"]
            else "no (sealed to the owner's key)"
        ),
        f"retired: {'yes: ' + str(summary['retired_reason']) if summary['retired'] else 'no'}",
    ]
    lines += [
        f"over budget, reason recorded: {reason}" for reason in summary["over_budget_reasons"]
    ]
    lines += [
        f"matches public corpus {match['corpus']} case {match['public_case']} (sealed with "
        "--force): not held out"
        for match in summary["public_matches"]
    ]
    lines += [f"exposure log problem: {p}" for p in summary["log_problems"]]
    return lines


def summary_html(summary: dict[str, Any]) -> str:
    """The same lines as an HTML section (escaped)."""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(summary)[1:])
    return (
        f'<section id="held-out-set"><h2>Held-out set</h2>'
        f"<p><strong>{html.escape(verdict_line(summary))}</strong></p><ul>{items}</ul></section>\n"
    )


REASON_OPTION = "heldout_reason"
"""The `[track_options]` key giving why a set is run past its exposure budget."""


def spec_reason(spec: ExperimentSpec) -> str:
    """The spec's over-budget reason (empty when none is given)."""
    value = spec.track_options.get(REASON_OPTION, "")
    if not isinstance(value, str):
        raise InputError("must be a text", location=f"track_options/{REASON_OPTION}")
    return value.strip()


def check_sealed_spec(sealed: SealedSet, spec: ExperimentSpec) -> None:
    """Refuse an altered set, and options a sealed set cannot honour (asked at every resolve)."""
    sealed.check_pins()
    spec_reason(spec)
    if spec.track_options.get("cases") is not None:
        raise InputError(
            "a sealed held-out set cannot select cases: its case ids are part of the sealed "
            "answer key",
            location="track_options/cases",
        )


def candidate_code_hashes(manifest: Manifest) -> list[str]:
    """One hash per candidate of what it is: kind, model, endpoint, entry, settings, pinned code.

    Two runs of the same code count one distinct candidate; an edited reviewer counts anew.
    An in-process candidate's code is its entry's file and its whole pinned package.
    """
    package = sorted(
        (record.name, record.sha256) for record in manifest.files
        if record.role == "candidate_package"
    )  # fmt: skip
    declared = {candidate.name: candidate for candidate in manifest.spec.candidates}
    hashes = []
    for candidate in manifest.candidates:
        code = sorted(
            (record.name, record.sha256) for record in manifest.files
            if record.role == "candidate_code" and record.name == candidate.entry
        )  # fmt: skip
        settings = declared[candidate.name].settings if candidate.name in declared else None
        described = {
            "kind": candidate.kind,
            "model": candidate.requested_model,
            "endpoint": candidate.endpoint,
            "entry": candidate.entry,
            "settings": json.loads(json.dumps(settings or {}, default=str)),
            "code": [list(pair) for pair in (code + package if candidate.entry else code)],
        }
        hashes.append(sha256_hex(canonical_json(described)))
    return hashes


def _exposure_notes(sealed: SealedSet, key: ExposureKey, reason: str) -> list[str]:
    summary = exposure_summary(sealed.folder, sealed.manifest, key)
    notes = [_exposure_text(summary)]
    if reason:
        notes.append(f"held-out set {sealed.set_id}: over-budget reason recorded: {reason}")
    return notes


def on_freeze(sealed: SealedSet, manifest: Manifest, reason: str = "") -> list[str]:
    """Record the freeze in the set's exposure log (once per experiment); the lines to print.

    Refused (before the manifest is written) for a tampered or retired set, without the set's
    exposure key, and when the set's runs reached the budget without a reason (`freeze
    --reason`, else the spec's `heldout_reason`).
    """
    spec = manifest.spec
    key = operator_exposure_key(sealed.manifest)
    entry = freeze_against(
        sealed.folder, sealed.manifest, key=key, candidates=[c.name for c in spec.candidates],
        trials=spec.trials_per_case, at=now_utc(), by=who(),
        reason=reason.strip() or spec_reason(spec),
        experiment=manifest.manifest_sha256,
    )  # fmt: skip
    return _exposure_notes(sealed, key, str(entry["reason"]))


def before_run(sealed: SealedSet, manifest: Manifest, run_dir: Path) -> list[str]:
    """Append (and fsync) this run to the exposure log before any trial starts.

    The authenticated entry is kept in the run folder too, so the owner's report finds it
    missing from a log deleted, cut back or replaced after the run. Whether the answer key was
    within a candidate's reach is checked, not guessed (see `key_reach`); the run entry records
    it as `key_in_environment` ("yes" or "no").
    """
    spec = manifest.spec
    key = operator_exposure_key(sealed.manifest)
    reached = key_reach(sealed, manifest, run_dir)
    exposed = "yes" if reached else "no"
    entry = record_run(
        sealed.folder, sealed.manifest, key=key, experiment=manifest.manifest_sha256,
        candidates=[c.name for c in spec.candidates],
        candidate_code=candidate_code_hashes(manifest), trials=spec.trials_per_case,
        at=now_utc(), by=who(), reason=spec_reason(spec), key_in_environment=exposed,
    )  # fmt: skip
    keep_run_record(run_dir, entry)
    notes = _exposure_notes(sealed, key, str(entry["reason"]))
    notes = [f"{notes[0]}; run {entry['seq']} of the log recorded (frozen by {entry['frozen_by']})"]
    notes += [f"the answer key is within the candidates' reach: {why}" for why in reached]
    return notes


def key_reach(sealed: SealedSet, manifest: Manifest, run_dir: Path | None) -> list[str]:
    """Why the owner's key is within a candidate's reach in this run (empty: it is not).

    Candidate code runs in its sandbox worker (`trustbench.sandbox`): a probe worker confined as
    each candidate's would be tries to read the key named by `$TRUSTBENCH_HELDOUT_KEY` and looks
    for any file starting with a private key's prefix among what it may read (a key saved beside
    the candidate's module). A candidate that runs in this process (`isolation = "none"`, or
    trustbench's own reviewers) shares it: the key is within its reach when
    `$TRUSTBENCH_HELDOUT_KEY` is set.
    """
    from trustbench.core import cache_root, isolation_of, runs_candidate_code
    from trustbench.rtb.heldout._crypto import PRIVATE_PREFIX

    spec = manifest.spec
    reasons: list[str] = []
    for candidate in spec.candidates:
        if candidate.kind != "inprocess" or candidate.entry is None:
            continue  # an API candidate or a person: nothing of theirs runs here
        if not runs_candidate_code(candidate) or isolation_of(candidate, spec) == "none":
            if os.environ.get(KEY_ENV, "").strip():
                reasons.append(
                    f"${KEY_ENV} is set and candidate {candidate.name} runs in this process"
                )
            continue
        from trustbench.sandbox import CandidateWorker, plan_for, probe_paths

        hidden = [str(sealed.folder), str(cache_root()), *([str(run_dir)] if run_dir else [])]
        probe = CandidateWorker(
            candidate.entry, plan_for(candidate.entry, hidden=hidden),
            probe=probe_paths(hidden), scan_prefixes=[PRIVATE_PREFIX],
        )  # fmt: skip
        reasons += [f"candidate {candidate.name}'s sandbox can read {p}" for p in probe.reach()]
    return reasons


RTB_CLEAR_PARTS = (
    "The candidate side was sent only the set's clear parts (the exported inputs, the prompt and "
    "the response schema); the answer key was opened only to grade this report."
)
"""What an RTB set's candidate side received (`held_out_section`'s `sent`)."""


def held_out_section(
    summary: dict[str, Any],
    owner: bool,
    *,
    withheld: str = "no per-case label, variant, case id or candidate text",
    owner_command: str = "trustbench rtb heldout report SET --run RUN --out DIR",
    sent: str = RTB_CLEAR_PARTS,
) -> TextBlock:
    """The report's "what was withheld and why" block, for the owner's or the candidate's report.

    A sealed TRB transfer split (`trb/corpus/_sealed.py`) uses the same block, naming what
    its candidate's report leaves out (`withheld`) and its own owner's command.
    """
    audience = (
        "This is the owner's detailed report: it names cases, labels and the candidates' "
        "replies; never hand it to a candidate's side."
        if owner
        else "This report is the one a candidate's developer may receive: aggregate figures and "
        f"intervals only ({withheld}). The per-case detail is in the owner's report "
        f"(`{owner_command}`, with the owner's key)."
    )
    return TextBlock(
        title="Held-out set: what was withheld and why",
        paragraphs=[*summary_lines(summary), sent, audience],
    )


_AGGREGATE_BLOCKS = frozenset({"figures", "forest", "confusion"})
"""Block kinds a candidate-side report keeps: figures with intervals, forest plots of them and
the reference x observed counts. Tables (per variant, group, rule, the case drill-down) and text
blocks (invalid-reply reasons quote candidate text) name cases or carry what a candidate wrote."""


def candidate_view(analysis: TrackAnalysis, summary: dict[str, Any]) -> TrackAnalysis:
    """The analysis a candidate's developer may receive: aggregate figures and intervals only.

    One report naming a case's label, variant or the candidate's own text beside an input it
    can recognise gives the key away (a candidate that fingerprints its input in its
    explanation maps every input to its label). So the track's record, every per-case table,
    every text block and every per-trial row are left out; the figures stay.
    """
    return dataclasses.replace(
        analysis,
        sections=[
            held_out_section(summary, owner=False),
            *(block for block in analysis.sections if block.kind in _AGGREGATE_BLOCKS),
        ],
        record={"held_out_set": summary, "held_out_report": "candidate"},
        summary={"held_out_set": summary},
        trial_rows={},
    )


def add_held_out_parts(
    analysis: TrackAnalysis, summary: dict[str, Any], *, owner: bool
) -> TrackAnalysis:
    """The held-out section in the record, the page, `--json` and every verdict line.

    Without `owner` the result is the candidate's view (`candidate_view`).
    """
    notes = analysis.record.get("console_notes")
    console = [*(notes if isinstance(notes, list) else []), *summary_lines(summary)]
    qualifications = [
        *analysis.qualifications,
        f"Held-out set {summary['set_id']}: {_exposure_text(summary).split(': ', 1)[1]}; "
        "every run exposes its cases to the candidates run against it.",
    ]
    analysis = dataclasses.replace(
        analysis, verdict_note=verdict_line(summary).removeprefix("VERDICT: "),
        qualifications=qualifications,
    )  # fmt: skip
    if not owner:  # the track's own console notes may quote replies: the set's lines only
        viewed = candidate_view(analysis, summary)
        notes = summary_lines(summary)
        return dataclasses.replace(viewed, record={**viewed.record, "console_notes": notes})
    return dataclasses.replace(
        analysis,
        sections=[held_out_section(summary, owner=True), *analysis.sections],
        record={
            **analysis.record, "held_out_set": summary, "held_out_report": "owner",
            "console_notes": console,
        },
        summary={**analysis.summary, "held_out_set": summary},
    )  # fmt: skip


def owner_report_folder(out_text: str, run_dir: Path) -> Path:
    """The folder an owner's report goes to: new or empty, and outside the run folder.

    The run folder is what may be handed to a candidate's side; an owner's report inside it
    (even in a subfolder) would travel with it.

    Raises:
        InputError: `--out` is a run folder, a file, holds files, or lies inside `run_dir`.
    """
    from trustbench.core import check_output_folder, output_path

    out = check_output_folder(output_path(out_text))
    resolved, run = out.resolve(), run_dir.resolve()
    if resolved == run or run in resolved.parents:
        raise InputError(
            "--out lies inside the run folder, which may be handed to a candidate's side: name a "
            "folder outside it",
            location=str(out),
        )
    if out.exists() and any(out.iterdir()):
        raise InputError("--out already holds files", location=str(out))
    return out


_OWNER_REPORT: ContextVar[bool] = ContextVar("heldout_owner_report", default=False)
"""Set only by `rtb heldout report --run` (`owner_report`): grading then keeps per-case detail."""


@contextmanager
def owner_report() -> Iterator[None]:
    """Within: a sealed set's grading yields the owner's detailed report, not the candidate's."""
    token = _OWNER_REPORT.set(True)
    try:
        yield
    finally:
        _OWNER_REPORT.reset(token)


def owner_key(sealed: SealedSet, what: str, key_file: Path | None = None) -> str:
    """The owner's private key (`key_file`, else `$TRUSTBENCH_HELDOUT_KEY`), or a refusal.

    Raises:
        InputError: Neither is given; one line naming both, and what needs the key.
    """
    from trustbench.rtb.heldout._crypto import read_private_key

    try:
        return read_private_key(key_file)
    except InputError:
        if key_file is not None:
            raise
        raise InputError(
            f"held-out set {sealed.set_id} is sealed: {what} needs the owner's private key "
            f"(--heldout-key FILE or ${KEY_ENV}); refusing without it"
        ) from None


def owner_check(
    sealed: SealedSet, private: str, source: Path | None, binding: dict[str, Any] | None,
    run_dir: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Check the count with the owner's key; the verified summary, or a refusal naming the change.

    Checked: the set manifest against what the seal binds (budget, identity), every log entry's
    and the head's authentication, the witness beside the owner's key file, and (for a report
    of a run) that each of the run's kept entries is still in the log. A count that passes is
    witnessed beside the key file, so a later rollback below it is refused too.

    Raises:
        CheckFailed: Naming the first change found.
    """
    from trustbench.rtb.heldout._seal import binding_problems

    problems = binding_problems(sealed.manifest, binding)
    return verified_summary(sealed.folder, sealed.manifest, private, source, run_dir, problems)


def verified_summary(
    folder: Path, manifest: dict[str, Any], private: str, source: Path | None,
    run_dir: Path | None = None, problems: Sequence[str] = (),
) -> dict[str, Any]:  # fmt: skip
    """The exposure summary of a log checked with the owner's key, or a refusal naming the change.

    `problems` found before (an RTB seal's binding) refuse first. Then every entry's and the
    head's authentication, the witness beside the key file and, for a report of a run, that each
    of the run's kept entries is still in the log. A count that passes is witnessed.

    Raises:
        CheckFailed: Naming the first change found.
    """
    key = owner_exposure_key(manifest, private, source)
    found = [*problems, *log_problems(folder, manifest, key)]
    if not found:
        found += run_record_problems(run_dir, folder, key, str(manifest["set_id"]))
    if found:  # a count that cannot be trusted is never reported as one
        raise CheckFailed(
            f"refusing to report held-out set {manifest['set_id']}: {found[0]}",
            location=str(folder),
        )
    witness(read_log(folder), str(manifest["set_id"]), key)
    return exposure_summary(folder, manifest, key)


def _experiment_summary(
    summary: dict[str, Any], folder: Path, manifest: Manifest
) -> dict[str, Any]:
    """The summary, the key-availability line narrowed to this experiment's runs."""
    return {
        **summary,
        "answer_key_available_to_candidate": any(
            e["kind"] == "run"
            and e.get("experiment") == manifest.manifest_sha256
            and e.get("key_in_environment") == "yes"
            for e in read_log(folder)
        ),
    }


def analyze_sealed(
    sealed: SealedSet,
    manifest: Manifest,
    ledger: LedgerContents,
    grade: Callable[[Manifest, LedgerContents, Any], TrackAnalysis],
) -> TrackAnalysis:
    """Grade a run against a sealed set with the owner's key (refused without it).

    The run folder gets the candidate's view; `rtb heldout report --run` (`owner_report`)
    writes the owner's detailed one elsewhere.

    Args:
        sealed: The set the experiment was frozen against.
        manifest: The frozen manifest.
        ledger: The run's ledger; its trials name exported evaluation ids.
        grade: The track's grading of an open corpus (`analyze_review`).

    Raises:
        InputError: No private key (names `--heldout-key` and the variable), or a wrong one.
        CheckFailed: The seal's binding, the exposure log or this run's kept entries show a
            change, or the opened answer key does not cover the planned evaluations.
    """
    from trustbench.rtb.corpus._export import EVALUATION_MAP_PATH, load_evaluation_map
    from trustbench.rtb.corpus._load import load_corpus
    from trustbench.rtb.heldout._seal import open_set, read_binding

    private, source = _key_text(KEY_ENV)
    if not private:
        owner_key(sealed, "grading")  # refuses, naming --heldout-key and the variable
    with tempfile.TemporaryDirectory() as scratch:
        opened = Path(scratch)
        open_set(sealed.folder, private, opened)
        summary = owner_check(sealed, private, source, read_binding(opened), ledger.run_dir)
        corpus = load_corpus(opened / "corpus")
        evaluations = load_evaluation_map(opened / EVALUATION_MAP_PATH).evaluations
        missing = sorted({t["case_id"] for t in ledger.trials} - evaluations.keys())
        if missing:
            raise CheckFailed(f"the sealed answer key has no case for evaluation {missing[0]}")
        trials = [{**t, "case_id": evaluations[t["case_id"]]} for t in ledger.trials]
        # The rows held in memory (a sealed set is small): the same ledger, its trials renamed.
        experiment = [ledger.experiment] if ledger.experiment else []
        renamed = LedgerContents(rows=(trials, ledger.attempts, ledger.events, experiment))
        analysis = grade(manifest, renamed, corpus)
    summary = _experiment_summary(summary, sealed.folder, manifest)
    return add_held_out_parts(analysis, summary, owner=_OWNER_REPORT.get())


# ------------------------------------------------------------------------------------------------
# `rtb export` and `rtb audit` on a sealed held-out set: export needs no key, audits do.
#
# `rtb export --corpus SET` copies the set's clear parts, which are exactly an export without its
# grader-only map (that stays sealed). The audits score rules and learners against the reference
# decisions, so `rtb audit --corpus SET` opens the answer key into a temporary folder with the
# owner's key for the length of the audit, and refuses without it.


@contextmanager
def corpus_with_labels(path: Path | None, key_file: Path | None, what: str) -> Iterator[Corpus]:
    """The corpus at `path`; a sealed set opened with the owner's key (refused without it)."""
    if path is None or not is_sealed_set(path):
        yield load_corpus(path)
        return
    pass

    sealed = SealedSet(path)
    private = owner_key(sealed, what, key_file)
    with tempfile.TemporaryDirectory() as scratch:
        open_set(path, private, Path(scratch))
        yield load_corpus(Path(scratch) / "corpus")


def export_clear(path: Path, out: Path) -> int:
    """Copy a sealed set's candidate-visible parts into `out`; returns the number of inputs."""
    sealed = SealedSet(path)
    sealed.check_pins()
    shutil.copytree(path / "inputs", out / "inputs", dirs_exist_ok=True)
    for rel in CLEAR_FILES:
        shutil.copyfile(path / rel, out / rel)
    return len(sealed.evaluation_ids())
