"""The exposure log of a held-out set: append-only, hash-chained, kept in the set folder.

This module is the one place that reads, checks and appends to the log: `rtb heldout freeze`,
`rtb retire` and the pipeline hooks (`trustbench freeze` / `run` against a sealed corpus, see
`_pipeline.py`) all go through it.

Each line of `exposure.jsonl` is one canonical-JSON entry: `seq`, `kind` (`freeze` for an
evaluation, `run` for a `trustbench run` of a frozen evaluation, `retire` for a retirement),
`set_id`, `candidates`, `trials`, `at`, `by`, `reason`, optionally `experiment` (the frozen
manifest's SHA-256, so one experiment is counted once however often it is resumed) and
`frozen_by` and `key_in_environment` (on a `run` entry: who froze it, and whether the owner's key
was in the run's environment), `prev_hash` and `hash` = sha256(prev_hash ||
canonical entry without `hash`), the same chaining rule as the run ledger's rows (the first entry
chains from a hash of the set id and recipient key, so a log cannot be moved to another set). A
freeze is appended and fsynced *before* anything runs, and a `run` entry before the run's first
trial, so a run killed at any point has already been counted. Editing, dropping, reordering or
inserting an entry breaks the chain, which `log_problems` reports; truncating the tail is caught
by the `exposure.head` file (count and last hash), rewritten after every append.
"""

from __future__ import annotations

import getpass
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trustbench._canonical import canonical_json, sha256_hex
from trustbench.errors import InputError

LOG_NAME = "exposure.jsonl"
HEAD_NAME = "exposure.head"


def now_utc() -> str:
    """The date and time an entry is made (UTC, to the second)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def who(by: str | None = None) -> str:
    """Who makes an entry: `by` when given, else the OS user."""
    return by or os.environ.get("USER") or getpass.getuser()


def _genesis(manifest: dict[str, Any]) -> str:
    return sha256_hex(
        canonical_json({"set_id": manifest["set_id"], "recipient": manifest["recipient"]})
    )


def _entry_hash(entry: dict[str, Any]) -> str:
    body = {k: v for k, v in entry.items() if k != "hash"}
    return sha256_hex(entry["prev_hash"].encode("ascii") + canonical_json(body))


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


def log_problems(folder: Path, manifest: dict[str, Any]) -> list[str]:
    """Why the exposure log cannot be trusted (empty: the chain and its head are intact)."""
    try:
        entries = read_log(folder)
    except InputError as exc:
        return [f"{LOG_NAME}: {exc}"]
    problems: list[str] = []
    prev = _genesis(manifest)
    for index, entry in enumerate(entries):
        where = f"{LOG_NAME} entry {index + 1}"
        if entry.get("seq") != index + 1 or entry.get("prev_hash") != prev:
            problems.append(f"{where}: out of sequence (dropped, inserted or reordered entry)")
            break
        if entry.get("set_id") != manifest["set_id"]:
            problems.append(f"{where}: names another set")
        try:
            ok = entry.get("hash") == _entry_hash(entry)
        except (TypeError, ValueError, AttributeError):
            ok = False
        if not ok:
            problems.append(f"{where}: hash does not match its content (edited entry)")
            break
        prev = entry["hash"]
    head_path = folder / HEAD_NAME
    head = head_path.read_text(encoding="ascii").strip() if head_path.exists() else ""
    expected = f"{len(entries)} {prev}" if entries else ""
    if not problems and head != expected:
        problems.append(f"{HEAD_NAME} does not match the log (truncated or replaced log)")
    return problems


def append_entry(
    folder: Path,
    manifest: dict[str, Any],
    *,
    kind: str,
    candidates: list[str],
    trials: int,
    at: str,
    by: str,
    reason: str = "",
    **extra: str,
) -> dict[str, Any]:
    """Append one entry (refusing to extend a broken log) and fsync it before returning.

    `extra` adds text fields (`experiment`, `frozen_by`); they are chained like the others.
    """
    problems = log_problems(folder, manifest)
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
    line = canonical_json(entry) + b"\n"
    descriptor = os.open(folder / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    temp = folder / (HEAD_NAME + ".tmp")
    temp.write_text(f"{entry['seq']} {entry['hash']}\n", encoding="ascii")
    os.replace(temp, folder / HEAD_NAME)
    return entry


def exposure_summary(folder: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Evaluations so far, the budget, over-budget reasons and retirement, from a verified log."""
    problems = log_problems(folder, manifest)
    entries = [] if problems else read_log(folder)
    freezes = [e for e in entries if e["kind"] == "freeze"]
    retired = next((e for e in entries if e["kind"] == "retire"), None)
    return {
        "set_id": manifest["set_id"],
        "case_count": manifest["case_count"],
        "evaluations": len(freezes),
        "runs": sum(1 for e in entries if e["kind"] == "run"),
        "budget": manifest["budget"],
        "over_budget_reasons": [e["reason"] for e in freezes[manifest["budget"] :]],
        "retired": retired is not None,
        "retired_reason": retired["reason"] if retired else None,
        "retired_at": retired["at"] if retired else None,
        "log_problems": problems,
        # Whether any run had the owner's key in its environment (in-process candidates share it).
        "answer_key_available_to_candidate": any(
            e["kind"] == "run" and e.get("key_in_environment") == "yes" for e in entries
        ),
        "withheld": manifest.get("withheld", ""),
    }


def refuse_freeze(summary: dict[str, Any], reason: str) -> None:
    """Refuse a new evaluation of a tampered or retired set, or one past its budget unreasoned.

    Raises:
        InputError: Naming the set and what is missing (a `--reason`, or the log repaired).
    """
    set_id = summary["set_id"]
    if summary["log_problems"]:
        raise InputError("exposure log tampered: " + "; ".join(summary["log_problems"]))
    if summary["retired"]:
        raise InputError(
            f"held-out set {set_id} is retired ({summary['retired_reason']}); "
            "it can no longer serve as a held-out set"
        )
    if summary["evaluations"] >= summary["budget"] and not reason.strip():
        raise InputError(
            f"held-out set {set_id} has been evaluated {summary['evaluations']} times (budget "
            f"{summary['budget']}); give a reason to freeze past the budget (--reason, or "
            "heldout_reason in the spec's [track_options])"
        )


def _frozen_entry(folder: Path, experiment: str) -> dict[str, Any] | None:
    """The `freeze` entry that counted the experiment `experiment`, if any."""
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
    candidates: list[str],
    trials: int,
    at: str,
    by: str,
    reason: str = "",
    experiment: str = "",
) -> dict[str, Any]:
    """Record one evaluation; past the budget only with a reason (recorded).

    An `experiment` (a frozen manifest's hash) already counted is not counted again: freezing
    the same spec twice is one evaluation. Returns the entry that counts it.
    """
    problems = log_problems(folder, manifest)
    if problems:
        raise InputError("exposure log tampered: " + "; ".join(problems))
    counted = _frozen_entry(folder, experiment)
    if counted is not None:
        return counted
    refuse_freeze(exposure_summary(folder, manifest), reason)
    extra = {"experiment": experiment} if experiment else {}
    return append_entry(
        folder, manifest, kind="freeze", candidates=candidates, trials=trials, at=at, by=by,
        reason=reason, **extra,
    )  # fmt: skip


def record_run(
    folder: Path,
    manifest: dict[str, Any],
    *,
    experiment: str,
    candidates: list[str],
    trials: int,
    at: str,
    by: str,
    reason: str = "",
    key_in_environment: str = "no",
) -> dict[str, Any]:
    """Record one `run` of a frozen experiment before any of its trials starts.

    An experiment frozen elsewhere (its freeze not in this log) is counted now, under the same
    budget rule. The `run` entry names who froze the experiment and who runs it.
    """
    frozen = freeze_against(folder, manifest, candidates=candidates, trials=trials, at=at,
                            by=by, reason=reason, experiment=experiment)  # fmt: skip
    return append_entry(
        folder, manifest, kind="run", candidates=candidates, trials=trials, at=at, by=by,
        reason=frozen["reason"], experiment=experiment, frozen_by=frozen["by"],
        key_in_environment=key_in_environment,
    )  # fmt: skip
