"""Export a run's ledger as Inspect AI eval logs, so `inspect view` shows every transcript.

One log per candidate, one sample per finished trial (sample id = trial id, epoch = trial index
+ 1). A sample shows the messages the candidate was sent, the reply of the final attempt and, as
model events, every counted attempt with its own reply, error and token usage: a transport retry
is a second event, never folded into the first. Models are named Inspect's way
(`openai/<model>`, `anthropic/<model>`, `trustbench/<candidate>` for in-process ones); token
usage is summed per sample and per log.

The score is trustbench's own grade of the trial, read from the run's `record.json`, as Inspect's
correct / incorrect: `C` only where the record says the trial came out right (reviewer track: a
supported finding; control path: `prevented` or `permitted_completed`), `I` for everything else,
a trial the record does not grade included (its answer then is `not_graded`, never a pass). The
answer is the trial's outcome (the decision, or `missing` / `invalid`). The log header carries
the metrics Inspect computes over those scores (`accuracy`, `stderr`), beside a note that
trustbench's own figures, with their intervals, are in the run's record.

The ledger is verified first; an altered ledger is never exported.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from trustbench.core import (
    STATEMENT_FILE,
    LedgerContents,
    Manifest,
    TrialKey,
    check_record_statement,
    read_ledger,
    read_manifest,
    verify_run,
)
from trustbench.errors import CheckFailed
from trustbench.interop._inspect import attempt_reply, request_messages, require_inspect

NOT_GRADED = "not_graded"
"""Score answer of a trial that `record.json` does not grade (no report yet, or another track)."""
SCORER = "trustbench"
"""Name of the score every exported sample carries."""
CORRECT_OUTCOMES = frozenset({"prevented", "permitted_completed"})
"""Control-path outcomes that count as correct (reviewer rows use their `supported` flag)."""
METRICS_NOTE = (
    "Inspect's accuracy and stderr over trustbench's correct/incorrect grades, every trial "
    "weighted alike; trustbench's own figures, with their intervals, are in the run's "
    "record.json and report."
)
"""Shown beside the header metrics."""
MODEL_PREFIX = {"openai_chat": "openai", "anthropic_messages": "anthropic"}
"""Inspect's provider prefix per candidate kind (others are `trustbench/<candidate>`)."""


def inspect_model_name(
    kind: str, requested_model: str | None, candidate: str, imported_from: Any = None
) -> str:
    """A candidate's model as Inspect names models: `<provider>/<model>`.

    A candidate imported from an Inspect log (`import-inspect`) keeps the log's model name.
    """
    if isinstance(imported_from, str) and "/" in imported_from:
        return imported_from
    prefix = MODEL_PREFIX.get(kind)
    if prefix is None or not requested_model:
        return f"trustbench/{candidate}"
    return f"{prefix}/{requested_model}"


def _record_rows(run_dir: Path, manifest: Manifest) -> dict[str, dict[str, Any]]:
    """Per-trial grades of the report (`record.trials.jsonl`, checked against `record.json`).

    Rows that name their `trial_id` (control path, workflow) are taken as they are; reviewer-track
    rows are taken when their `configuration` is a candidate's name (a single), since chains
    and the unchecked baseline are not trials of one candidate.

    Raises:
        CheckFailed: the record belongs to another manifest, its statement does not match, or
            the trial rows are not the ones the record names by digest.
    """
    # The report package loads when an export reads a record, not with `trustbench.interop`
    # (which every `trustbench` command imports for its commands).
    from trustbench.core.report import TRIAL_ROWS_FILE, iter_trial_rows, trial_rows_problems

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
    from inspect_ai.scorer import CORRECT, INCORRECT, Score

    if grade is None:
        return Score(
            value=INCORRECT,
            answer=NOT_GRADED,
            explanation="record.json grades no such trial: run `trustbench report` first",
            metadata={"status": trial["status"], "error_class": trial["error_class"]},
        )
    nested = found if isinstance(found := grade.get("grade"), dict) else {}
    # A row without an outcome class is shown as not graded, never as some passing value.
    outcome = grade.get("outcome", nested.get("outcome")) or NOT_GRADED
    reasons = [r for r in grade.get("invalid_reasons") or [] if r]
    errors = [e for e in grade.get("error_classes") or [] if e]
    explanation = f"trustbench outcome {outcome}; supported {grade.get('supported')}"
    if grade.get("reference") is not None:
        explanation += f"; reference decision {grade['reference']}"
    if reasons or errors:
        explanation += f"; {'; '.join(reasons + errors)}"
    correct = grade.get("supported") is True or (
        "supported" not in grade and outcome in CORRECT_OUTCOMES
    )
    return Score(
        value=CORRECT if correct else INCORRECT,
        answer=outcome,
        explanation=explanation,
        metadata=grade,
    )


def _usage(attempts: list[dict[str, Any]]) -> Any:
    """Inspect's `ModelUsage` for these attempts (None when none reported any tokens)."""
    from inspect_ai.model import ModelUsage

    reported = [
        a
        for a in attempts
        if a.get("prompt_tokens") is not None or a.get("completion_tokens") is not None
    ]
    if not reported:
        return None
    tokens_in = sum(a.get("prompt_tokens") or 0 for a in reported)
    tokens_out = sum(a.get("completion_tokens") or 0 for a in reported)
    costs = [cost for a in attempts if (cost := a.get("cost_usd")) is not None]
    return ModelUsage(
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        total_tokens=tokens_in + tokens_out,
        # A cost is summed only when every attempt has one: an unknown cost is not zero.
        total_cost=sum(costs) if costs and len(costs) == len(attempts) else None,
    )


def _add_usage(total: Any, usage: Any) -> Any:
    if usage is None:
        return total
    return usage if total is None else total + usage


def _attempt_event(attempt: dict[str, Any], model: str) -> Any:
    from inspect_ai.event import ModelEvent
    from inspect_ai.model import GenerateConfig, ModelOutput

    reply = attempt_reply(attempt)
    error = attempt.get("error_message") or attempt.get("error_class")
    output = ModelOutput.from_content(
        attempt.get("reported_model") or model, reply or "", error=error
    )
    output.usage = _usage([attempt])
    return ModelEvent(
        timestamp=attempt["started_at"],
        model=model,
        requested_model=attempt.get("requested_model"),
        input=request_messages(attempt.get("request")),
        tools=[],
        tool_choice="none",
        config=GenerateConfig(),
        output=output,
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
    trial: dict[str, Any],
    ledger: LedgerContents,
    manifest: Manifest,
    grade: dict[str, Any] | None,
    model: str,
) -> Any:
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.model import ChatMessageAssistant

    attempts = ledger.attempts_of(trial["trial_id"])
    usage = _usage(attempts)
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
        output=_output(model, attempts, reply, trial["error"]),
        scores={SCORER: _score(trial, grade)},
        model_usage={model: usage} if usage is not None else {},
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
        events=[_attempt_event(a, model) for a in attempts],
        error=EvalError(
            message=trial["error"] or str(trial["error_class"]), traceback="", traceback_ansi=""
        )
        if failed
        else None,
        started_at=trial["started_at"],
        completed_at=trial["finished_at"],
        total_time=trial["duration_s"],
    )


def _output(model: str, attempts: list[dict[str, Any]], reply: str | None, error: Any) -> Any:
    from inspect_ai.model import ModelOutput

    reported = attempts[-1].get("reported_model") if attempts else None
    output = ModelOutput.from_content(reported or model, reply or "", error=error)
    output.usage = _usage(attempts[-1:])
    return output


def _results(samples: list[Any], planned: int) -> Any:
    """Inspect's header results: accuracy and stderr over the samples' scores, with the note."""
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore
    from inspect_ai.scorer import SampleScore, accuracy, stderr

    scored = [
        SampleScore(score=s.scores[SCORER], sample_id=s.id, sample_metadata=s.metadata)
        for s in samples
    ]
    metrics = (
        {
            # Inspect types a metric as a union of its old and new call signatures, each
            # returning any `Value`; accuracy and stderr take sample scores and return a float.
            name: EvalMetric(name=name, value=float(metric()(scored)))  # pyright: ignore[reportArgumentType]
            for name, metric in (("accuracy", accuracy), ("stderr", stderr))
        }
        if scored
        else {}
    )
    score = EvalScore(
        name=SCORER,
        scorer=SCORER,
        scored_samples=len(scored),
        unscored_samples=0,
        metrics=metrics,
        metadata={"note": METRICS_NOTE},
    )
    return EvalResults(
        total_samples=planned,
        completed_samples=len(samples),
        scores=[score],
        metadata={"note": METRICS_NOTE},
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
        EvalSpec,
        EvalStats,
        write_eval_log,
    )

    verification = verify_run(run_dir)
    tampering = verification.alterations
    if tampering:
        raise CheckFailed(
            f"refusing to export an altered run: {tampering[0]}", location=str(run_dir)
        )
    manifest = read_manifest(run_dir)
    ledger = read_ledger(run_dir)
    grades = _record_rows(run_dir, manifest)
    spec = manifest.spec
    created = ledger.experiment.get("created_at") or ""
    settings_of = {c.name: c.settings for c in spec.candidates}
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for candidate in manifest.candidates:
        trials = sorted(
            (t for t in ledger.trials if t["candidate"] == candidate.name),
            key=lambda t: t["order_position"],
        )
        settings = settings_of.get(candidate.name) or {}
        model = inspect_model_name(
            candidate.kind, candidate.requested_model, candidate.name, settings.get("inspect_model")
        )
        samples = [_sample(t, ledger, manifest, grades.get(t["trial_id"]), model) for t in trials]
        planned = manifest.plan.trials // max(len(manifest.candidates), 1)
        usage = None
        for sample in samples:
            usage = _add_usage(usage, sample.model_usage.get(model))
        log = EvalLog(
            status="success" if not verification.problems else "cancelled",
            eval=EvalSpec(
                created=created,
                task=f"trustbench/{spec.track_id}",
                task_id=manifest.manifest_sha256[:22],
                dataset=EvalDataset(name=manifest.corpus.root, samples=planned),
                model=model,
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
            results=_results(samples, planned),
            stats=EvalStats(
                started_at=trials[0]["started_at"] if trials else "",
                completed_at=trials[-1]["finished_at"] if trials else "",
                model_usage={model: usage} if usage is not None else {},
            ),
            samples=samples,
        )
        # Candidate names may hold ":" (e.g. an imported `openai:gpt-x`): not in file names.
        path = out_dir / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', candidate.name)}.eval"
        write_eval_log(log, path)
        written.append(path)
    return written
