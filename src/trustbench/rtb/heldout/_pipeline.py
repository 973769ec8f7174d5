"""How `trustbench freeze` / `run` / `report` treat a sealed held-out set used as a corpus.

- `freeze` (`on_freeze`, before the manifest is written): refuses a tampered or retired set, and
  one past its budget unless `freeze --reason` (or `heldout_reason` in `[track_options]`) says
  why; otherwise the
  freeze is appended to the exposure log, naming the experiment by its manifest hash (freezing
  the same experiment again counts nothing new).
- `run` (`before_run`): before any trial, a `run` entry is appended and fsynced (who froze it,
  who runs it, candidates, trials), so a run killed at any point has been recorded; a run
  refused before that (an altered ledger, an unreachable Ray address) appends nothing; an
  experiment frozen against another copy of the set is counted there and then, under the same
  budget rule.
- `report` (`analyze_sealed`): needs the owner's private key (`--heldout-key FILE` or
  `$TRUSTBENCH_HELDOUT_KEY`) and refuses without it before anything is written; it opens the
  answer key into a temporary folder, maps each trial's exported evaluation id to its case, grades
  as for any corpus, and adds the held-out section (record, HTML, `--json`, verdict line).

Every log read and write goes through the functions below.
"""

from __future__ import annotations

import dataclasses
import getpass
import html
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trustbench._canonical import canonical_json, sha256_hex
from trustbench.core import ExperimentSpec, LedgerContents, Manifest, TrackAnalysis
from trustbench.core.report import TextBlock
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.corpus._load import Corpus, load_corpus
from trustbench.rtb.heldout._corpus import SealedSet, is_sealed_set
from trustbench.rtb.heldout._crypto import KEY_ENV
from trustbench.rtb.heldout._seal import CLEAR_FILES, open_set

# ------------------------------------------------------------------------------------------------
# The exposure log of a held-out set: append-only, hash-chained, kept in the set folder.
#
# This module is the one place that reads, checks and appends to the log: `rtb heldout freeze`,
# `rtb retire` and the pipeline hooks (`trustbench freeze` / `run` against a sealed corpus, below)
# all go through it.
#
# Each line of `exposure.jsonl` is one canonical-JSON entry: `seq`, `kind` (`freeze` for an
# evaluation, `run` for a `trustbench run` of a frozen evaluation, `retire` for a retirement),
# `set_id`, `candidates`, `trials`, `at`, `by`, `reason`, optionally `experiment` (the frozen
# manifest's SHA-256, so one experiment is counted once however often it is resumed) and
# `frozen_by` and `key_in_environment` (on a `run` entry: who froze it, and whether the owner's key
# was in the run's environment), `prev_hash` and `hash` = sha256(prev_hash ||
# canonical entry without `hash`), the same chaining rule as the run ledger's rows (the first entry
# chains from a hash of the set id and recipient key, so a log cannot be moved to another set). A
# freeze is appended and fsynced *before* anything runs, and a `run` entry before the run's first
# trial, so a run killed at any point has already been counted. Editing, dropping, reordering or
# inserting an entry breaks the chain, which `log_problems` reports; truncating the tail is caught
# by the `exposure.head` file (count and last hash), rewritten after every append.

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


# ------------------------------------------------------------------------------------------------
# What a report says about a held-out set: what was withheld, why, how often it was exposed.


def verdict_line(summary: dict[str, Any]) -> str:
    """The verdict line; a retired or tampered set says so first, so it never reads as held out."""
    if summary["log_problems"]:
        return f"VERDICT: held-out set {summary['set_id']}: exposure log TAMPERED; not trustworthy"
    head = f"held-out set {summary['set_id']}: evaluated {summary['evaluations']} times "
    head += f"(budget {summary['budget']})"
    if summary["retired"]:
        return f"VERDICT: RETIRED (exposed: {summary['retired_reason']}); {head}; not held out"
    if summary["evaluations"] > summary["budget"]:
        return f"VERDICT: OVER BUDGET; {head}"
    return f"VERDICT: {head}"


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """Plain-text lines for the terminal report."""
    lines = [
        verdict_line(summary),
        f"held-out set {summary['set_id']}: evaluated {summary['evaluations']} times "
        f"(budget {summary['budget']})",
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
"""The `[track_options]` key giving why a set is frozen past its exposure budget."""


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


def _exposure_notes(sealed: SealedSet, reason: str) -> list[str]:
    summary = exposure_summary(sealed.folder, sealed.manifest)
    notes = [summary_lines(summary)[1]]
    if reason:
        notes.append(f"held-out set {sealed.set_id}: over-budget reason recorded: {reason}")
    return notes


def on_freeze(sealed: SealedSet, manifest: Manifest, reason: str = "") -> list[str]:
    """Count the freeze in the set's exposure log (once per experiment); the lines to print.

    Refused (before the manifest is written) for a tampered or retired set, and past the
    budget without a reason (`freeze --reason`, else the spec's `heldout_reason`); an
    experiment already counted is not counted again.
    """
    spec = manifest.spec
    entry = freeze_against(
        sealed.folder, sealed.manifest, candidates=[c.name for c in spec.candidates],
        trials=spec.trials_per_case, at=now_utc(), by=who(),
        reason=reason.strip() or spec_reason(spec),
        experiment=manifest.manifest_sha256,
    )  # fmt: skip
    return _exposure_notes(sealed, str(entry["reason"]))


def before_run(sealed: SealedSet, manifest: Manifest, run_dir: Path | None = None) -> list[str]:
    """Append (and fsync) this run to the exposure log before any trial starts.

    Whether the answer key was within a candidate's reach is checked, not guessed (see
    `key_reach`); the run entry records it as `key_in_environment` ("yes" or "no").
    """
    spec = manifest.spec
    reached = key_reach(sealed, manifest, run_dir)
    exposed = "yes" if reached else "no"
    entry = record_run(
        sealed.folder, sealed.manifest, experiment=manifest.manifest_sha256,
        candidates=[c.name for c in spec.candidates], trials=spec.trials_per_case,
        at=now_utc(), by=who(), reason=spec_reason(spec), key_in_environment=exposed,
    )  # fmt: skip
    notes = _exposure_notes(sealed, str(entry["reason"]))
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


def _held_out_section(summary: dict[str, Any]) -> TextBlock:
    return TextBlock(
        title="Held-out set: what was withheld and why",
        paragraphs=[
            *summary_lines(summary),
            "The candidate side was sent only the set's clear parts (the exported inputs, the "
            "prompt and the response schema); the answer key was opened only to grade this "
            "report.",
        ],
    )


def add_held_out_parts(
    analysis: TrackAnalysis, sealed: SealedSet, manifest: Manifest
) -> TrackAnalysis:
    """The held-out section in the record, the page, `--json` and every verdict line.

    The answer key counts as available to the candidate side when any run of this experiment
    had the owner's key in its environment (recorded by `before_run`).
    """
    summary = exposure_summary(sealed.folder, sealed.manifest)
    summary["answer_key_available_to_candidate"] = any(
        e["kind"] == "run"
        and e.get("experiment") == manifest.manifest_sha256
        and e.get("key_in_environment") == "yes"
        for e in read_log(sealed.folder)
    )
    notes = analysis.record.get("console_notes")
    console = [*(notes if isinstance(notes, list) else []), *summary_lines(summary)]
    return dataclasses.replace(
        analysis,
        sections=[_held_out_section(summary), *analysis.sections],
        record={**analysis.record, "held_out_set": summary, "console_notes": console},
        summary={**analysis.summary, "held_out_set": summary},
        verdict_note=verdict_line(summary).removeprefix("VERDICT: "),
        qualifications=[
            *analysis.qualifications,
            f"Held-out set {summary['set_id']}: {summary_lines(summary)[1].split(': ', 1)[1]}; "
            "every evaluation exposes its cases to the candidates run against it.",
        ],
    )


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


def analyze_sealed(
    sealed: SealedSet,
    manifest: Manifest,
    ledger: LedgerContents,
    grade: Callable[[Manifest, LedgerContents, Any], TrackAnalysis],
) -> TrackAnalysis:
    """Grade a run against a sealed set with the owner's key (refused without it).

    Args:
        sealed: The set the experiment was frozen against.
        manifest: The frozen manifest.
        ledger: The run's ledger; its trials name exported evaluation ids.
        grade: The track's grading of an open corpus (`analyze_review`).

    Raises:
        InputError: No private key (names `--heldout-key` and the variable), or a wrong one.
        CheckFailed: The exposure log was tampered, or the opened answer key does not cover
            the planned evaluations.
    """
    from trustbench.rtb.corpus._export import EVALUATION_MAP_PATH, load_evaluation_map
    from trustbench.rtb.corpus._load import load_corpus
    from trustbench.rtb.heldout._seal import open_set

    private = owner_key(sealed, "grading")
    problems = exposure_summary(sealed.folder, sealed.manifest)["log_problems"]
    if problems:  # a count that cannot be trusted is never reported as one
        raise CheckFailed(
            f"refusing to report against held-out set {sealed.set_id}: its exposure log was "
            f"tampered ({problems[0]}); see `trustbench rtb heldout verify`",
            location=str(sealed.folder),
        )
    with tempfile.TemporaryDirectory() as scratch:
        opened = Path(scratch)
        open_set(sealed.folder, private, opened)
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
    return add_held_out_parts(analysis, sealed, manifest)


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
