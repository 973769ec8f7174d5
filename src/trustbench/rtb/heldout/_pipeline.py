"""How `trustbench freeze` / `run` / `report` treat a sealed held-out set used as a corpus.

- `freeze` (`on_freeze`, before the manifest is written): refuses a tampered or retired set, and
  one past its budget unless `freeze --reason` (or `heldout_reason` in `[track_options]`) says
  why; otherwise the
  freeze is appended to the exposure log, naming the experiment by its manifest hash (freezing
  the same experiment again counts nothing new).
- `run` (`before_run`): before any trial, a `run` entry is appended and fsynced (who froze it,
  who runs it, candidates, trials), so a run killed at any point has been recorded; a run
  refused before that (an altered ledger, an unreachable Ray address) appends nothing; an experiment
  frozen against another copy of the set is counted there and then, under the same budget rule.
- `report` (`analyze_sealed`): needs the owner's private key (`--heldout-key FILE` or
  `$TRUSTBENCH_HELDOUT_KEY`) and refuses without it before anything is written; it opens the
  answer key into a temporary folder, maps each trial's exported evaluation id to its case, grades
  as for any corpus, and adds the held-out section (record, HTML, `--json`, verdict line).

Every log read and write goes through `_exposure.py`.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trustbench.core import ExperimentSpec, LedgerContents, Manifest, TrackAnalysis
from trustbench.core.report import TextBlock
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.heldout._corpus import SealedSet
from trustbench.rtb.heldout._crypto import KEY_ENV
from trustbench.rtb.heldout._exposure import (
    exposure_summary,
    freeze_against,
    now_utc,
    read_log,
    record_run,
    who,
)
from trustbench.rtb.heldout._report import summary_lines, verdict_line

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


def before_run(sealed: SealedSet, manifest: Manifest) -> list[str]:
    """Append (and fsync) this run to the exposure log before any trial starts."""
    spec = manifest.spec
    # An in-process candidate shares this process's environment: if the owner's key is in it,
    # the answer key was within the candidate's reach, and the report must say so.
    exposed = "yes" if os.environ.get(KEY_ENV, "").strip() else "no"
    entry = record_run(
        sealed.folder, sealed.manifest, experiment=manifest.manifest_sha256,
        candidates=[c.name for c in spec.candidates], trials=spec.trials_per_case,
        at=now_utc(), by=who(), reason=spec_reason(spec), key_in_environment=exposed,
    )  # fmt: skip
    notes = _exposure_notes(sealed, str(entry["reason"]))
    notes = [f"{notes[0]}; run {entry['seq']} of the log recorded (frozen by {entry['frozen_by']})"]
    if exposed == "yes":
        notes.append(
            f"${KEY_ENV} is set in this run's environment: the answer key is within the "
            "candidates' reach, and the report will say so"
        )
    return notes


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
