"""Export a run's ledger as Inspect AI eval logs, so `inspect view` shows every transcript.

One log per candidate, one sample per finished trial (sample id = trial id, epoch = trial index
+ 1). A sample shows the messages the candidate was sent, the reply of the final attempt and, as
model events, every counted attempt with its own reply or error: a transport retry is a second
event, never folded into the first. The score is trustbench's own grade of the trial, read from
the run's `record.json` (outcome, whether the finding is supported, error classes); a trial the
record does not grade is scored `not_graded`, never as a pass. Inspect's own metrics are not
computed: the figures that count are the ones in the trustbench report.

The ledger is verified first; an altered ledger is never exported.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from trustbench.core._attestation import STATEMENT_FILE, check_record_statement
from trustbench.core._export import LedgerContents, read_ledger
from trustbench.core._manifest import Manifest, read_manifest
from trustbench.core._track import TrialKey
from trustbench.core._verify import verify_run
from trustbench.core.report._trial_rows import (
    TRIAL_ROWS_FILE,
    iter_trial_rows,
    trial_rows_problems,
)
from trustbench.errors import CheckFailed
from trustbench.interop._inspect import attempt_reply, request_messages, require_inspect

NOT_GRADED = "not_graded"
"""Score value of a trial that `record.json` does not grade (no report yet, or another track)."""


def _record_rows(run_dir: Path, manifest: Manifest) -> dict[str, dict[str, Any]]:
    """Per-trial grades of the report (`record.trials.jsonl`, checked against `record.json`).

    Rows that name their `trial_id` (control path, workflow) are taken as they are; reviewer-track
    rows are taken when their `configuration` is a candidate's name (a single), since chains
    and the unchecked baseline are not trials of one candidate.

    Raises:
        CheckFailed: the record belongs to another manifest, its statement does not match, or
            the trial rows are not the ones the record names by digest.
    """
    path = run_dir / "record.json"
    if not path.exists():
        return {}
    if (run_dir / STATEMENT_FILE).exists():
        check = check_record_statement(run_dir)
        if not check.ok:
            raise CheckFailed(check.problems[0], location=str(run_dir / STATEMENT_FILE))
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CheckFailed(f"record.json is unreadable: {error}", location=str(path)) from None
    if not isinstance(record, dict) or record.get("manifest_sha256") != manifest.manifest_sha256:
        raise CheckFailed("record.json belongs to another manifest", location=str(path))
    problems = trial_rows_problems(run_dir, record)
    if problems:
        raise CheckFailed(problems[0], location=str(run_dir / TRIAL_ROWS_FILE))
    names = {candidate.name for candidate in manifest.spec.candidates}
    rows: dict[str, dict[str, Any]] = {}
    for row in iter_trial_rows(run_dir):
        row.pop("part")
        if isinstance(row.get("trial_id"), str):  # control / workflow rows name the trial
            rows[row["trial_id"]] = row
            continue
        candidate = row.get("configuration")
        index = row.get("trial")
        if candidate in names and isinstance(index, int) and "case_id" in row:
            rows[TrialKey(row["case_id"], candidate, index).trial_id] = row
    return rows


def _score(trial: dict[str, Any], grade: dict[str, Any] | None) -> Any:
    from inspect_ai.scorer import Score

    if grade is None:
        return Score(
            value=NOT_GRADED,
            explanation="record.json grades no such trial: run `trustbench report` first",
            metadata={"status": trial["status"], "error_class": trial["error_class"]},
        )
    nested = grade.get("grade") if isinstance(grade.get("grade"), dict) else {}
    # A row without an outcome class is shown as not graded, never as some passing value.
    outcome = grade.get("outcome", nested.get("outcome")) or NOT_GRADED
    reasons = [r for r in grade.get("invalid_reasons") or [] if r]
    errors = [e for e in grade.get("error_classes") or [] if e]
    explanation = f"trustbench outcome {outcome}; supported {grade.get('supported')}"
    if grade.get("reference") is not None:
        explanation += f"; reference decision {grade['reference']}"
    if reasons or errors:
        explanation += f"; {'; '.join(reasons + errors)}"
    return Score(value=outcome, answer=outcome, explanation=explanation, metadata=grade)


def _attempt_event(attempt: dict[str, Any], model: str) -> Any:
    from inspect_ai.event import ModelEvent
    from inspect_ai.model import GenerateConfig, ModelOutput

    reply = attempt_reply(attempt)
    error = attempt.get("error_message") or attempt.get("error_class")
    return ModelEvent(
        timestamp=attempt["started_at"],
        model=attempt.get("reported_model") or model,
        requested_model=attempt.get("requested_model"),
        input=request_messages(attempt.get("request")),
        tools=[],
        tool_choice="none",
        config=GenerateConfig(),
        output=ModelOutput.from_content(model, reply or "", error=error),
        error=error,
        working_time=attempt.get("latency_s"),
        metadata={
            key: attempt.get(key)
            for key in (
                "call", "call_index", "attempt_index", "kind", "http_status", "error_class",
                "request_digest", "endpoint", "latency_s", "raw_response",
            )
        },
    )  # fmt: skip


def _sample(
    trial: dict[str, Any], ledger: LedgerContents, manifest: Manifest, grade: dict[str, Any] | None
) -> Any:
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.model import ChatMessageAssistant, ModelOutput

    attempts = ledger.attempts_of(trial["trial_id"])
    model = attempts[-1].get("requested_model") if attempts else trial["candidate"]
    first = attempts[0].get("request") if attempts else None
    sent = request_messages(first)
    reply = attempt_reply(attempts[-1]) if attempts else None
    failed = trial["status"] != "completed"
    messages = [*sent, ChatMessageAssistant(content=reply)] if reply else list(sent)
    return EvalSample(
        id=trial["trial_id"],
        epoch=int(trial["trial_index"]) + 1,
        input=sent or "(no call was recorded for this trial)",
        target="",
        messages=messages,
        output=ModelOutput.from_content(str(model), reply or "", error=trial["error"]),
        scores={"trustbench": _score(trial, grade)},
        metadata={
            "trial_id": trial["trial_id"],
            "case_id": trial["case_id"],
            "candidate": trial["candidate"],
            "trial_index": trial["trial_index"],
            "manifest_sha256": manifest.manifest_sha256,
            "status": trial["status"],
            "error_class": trial["error_class"],
            "attempts": len(attempts),
            "transport_retries": sum(1 for a in attempts if a.get("kind") == "transport_retry"),
        },
        events=[_attempt_event(a, str(model)) for a in attempts],
        error=EvalError(
            message=trial["error"] or str(trial["error_class"]), traceback="", traceback_ansi=""
        )
        if failed
        else None,
        started_at=trial["started_at"],
        completed_at=trial["finished_at"],
        total_time=trial["duration_s"],
    )


def export_inspect_logs(run_dir: Path, out_dir: Path) -> list[Path]:
    """Write one Inspect eval log per candidate of the run into `out_dir`.

    Returns:
        The log files written (`<candidate>.eval`, `:` and other unsafe characters as `_`), in
        candidate order.

    Raises:
        CheckFailed: the ledger, manifest or signed record was altered.
        InputError: Inspect AI is not installed, or the run folder is incomplete.
    """
    require_inspect()
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalResults,
        EvalSpec,
        EvalStats,
        write_eval_log,
    )

    from trustbench.core._report_run import _INTERRUPTED

    verification = verify_run(run_dir)
    tampering = [p for p in verification.problems if _INTERRUPTED not in p]
    if tampering:
        raise CheckFailed(
            f"refusing to export an altered run: {tampering[0]}", location=str(run_dir)
        )
    manifest = read_manifest(run_dir)
    ledger = read_ledger(run_dir)
    grades = _record_rows(run_dir, manifest)
    spec = manifest.spec
    created = ledger.experiment.get("created_at") or ""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for candidate in manifest.candidates:
        trials = sorted(
            (t for t in ledger.trials if t["candidate"] == candidate.name),
            key=lambda t: t["order_position"],
        )
        samples = [_sample(t, ledger, manifest, grades.get(t["trial_id"])) for t in trials]
        planned = manifest.plan.trials // max(len(manifest.candidates), 1)
        log = EvalLog(
            status="success" if not verification.problems else "cancelled",
            eval=EvalSpec(
                created=created,
                task=f"trustbench/{spec.track_id}",
                task_id=manifest.manifest_sha256[:22],
                dataset=EvalDataset(name=manifest.corpus.root, samples=planned),
                model=candidate.requested_model or f"trustbench/{candidate.name}",
                model_base_url=candidate.endpoint,
                config=EvalConfig(epochs=spec.trials_per_case),
                metadata={
                    "source": "trustbench export-inspect",
                    "run_dir": str(run_dir),
                    "manifest_sha256": manifest.manifest_sha256,
                    "candidate": candidate.name,
                    "candidate_kind": candidate.kind,
                    "corpus_version": manifest.corpus.version,
                    "complete": not verification.problems,
                },
            ),
            results=EvalResults(total_samples=planned, completed_samples=len(samples)),
            stats=EvalStats(
                started_at=trials[0]["started_at"] if trials else "",
                completed_at=trials[-1]["finished_at"] if trials else "",
            ),
            samples=samples,
        )
        # Candidate names may hold ":" (e.g. an imported `openai:gpt-x`): not in file names.
        path = out_dir / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', candidate.name)}.eval"
        write_eval_log(log, path)
        written.append(path)
    return written
