"""Shared pieces of the Inspect AI interop: the optional-dependency check and message conversion.

Inspect AI is an optional extra (`pip install -e '.[inspect]'`); nothing outside
`trustbench.interop` imports it, and the interop commands import it only when they run.
"""

from __future__ import annotations

import importlib.util
import io
import json
import re
from pathlib import Path
from typing import Any

from trustbench._canonical import canonical_json, read_input_file, sha256_hex
from trustbench.core import (
    STATEMENT_FILE,
    Ledger,
    LedgerContents,
    Manifest,
    TrialKey,
    build_manifest,
    check_record_statement,
    read_ledger,
    read_manifest,
    utc_now,
    verify_run,
    write_manifest,
)
from trustbench.errors import CheckFailed, InputError
from trustbench.interop._rtb_export import ExportedReview, load_exported_review

INSTALL_HINT = (
    "install the `inspect` extra: pip install -e '.[inspect]' in a clone (README: Installing "
    "without make)"
)
"""What to tell a user who runs an interop command without Inspect AI."""


def require_inspect() -> None:
    """Fail with an actionable message when Inspect AI is not installed.

    Raises:
        InputError: `inspect_ai` cannot be imported.
    """
    if importlib.util.find_spec("inspect_ai") is None:
        raise InputError(f"Inspect AI is not installed; {INSTALL_HINT}")


def chat_messages(messages: list[dict[str, Any]]) -> list[Any]:
    """Provider-neutral `{"role", "content"}` messages as Inspect chat messages."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser}
    converted: list[Any] = []
    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        kind = kinds.get(str(message.get("role")), ChatMessageAssistant)
        converted.append(kind(content=text))
    return converted


def attempt_reply(attempt: dict[str, Any]) -> str | None:
    """The reply text an attempt received, from its raw response (None when there was none).

    The raw response is what the candidate sent: an OpenAI-shaped body (`choices`), an
    Anthropic-shaped body (`content` blocks), an in-process reply (`text`), or anything else,
    which is returned verbatim so a malformed body stays visible.
    """
    raw = attempt.get("raw_response")
    if raw is None:
        return None
    try:
        body = json.loads(raw)
    except (TypeError, ValueError):
        return str(raw)
    if isinstance(body, dict):
        choices = body.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            content = (choices[0].get("message") or {}).get("content")
            return content if isinstance(content, str) else None
        if isinstance(body.get("text"), str) or "text" in body:
            return body.get("text")
        blocks = body.get("content")
        if isinstance(blocks, list):
            return "".join(b.get("text", "") for b in blocks if isinstance(b, dict)) or None
    return str(raw)


def request_messages(request: Any) -> list[Any]:
    """The messages of a recorded request, as Inspect chat messages.

    A chat request's `messages` are converted one for one; any other recorded request (a tool
    call, a boundary check, an adapter call) is shown whole, as JSON, in one user message, so no
    call looks as if nothing was sent.
    """
    if request is None:
        return []
    if isinstance(request, dict) and isinstance(request.get("messages"), list):
        return chat_messages(request["messages"])
    return chat_messages(
        [{"role": "user", "content": json.dumps(request, ensure_ascii=False, sort_keys=True)}]
    )


# ------------------------------------------------------------------------------------------------
# Export a run's ledger as Inspect AI eval logs, so `inspect view` shows every transcript.
#
# One log per candidate, one sample per finished trial (sample id = trial id, epoch = trial index
# + 1). A sample shows the messages the candidate was sent, the reply of the final attempt and, as
# model events, every counted attempt with its own reply, error and token usage: a transport retry
# is a second event, never folded into the first. Models are named Inspect's way
# (`openai/<model>`, `anthropic/<model>`, `trustbench/<candidate>` for in-process ones); token
# usage is summed per sample and per log.
#
# The score is trustbench's own grade of the trial, read from the run's `record.json`, as Inspect's
# correct / incorrect: `C` only where the record says the trial came out right (reviewer track: a
# supported finding; control path: `prevented` or `permitted_completed`), `I` for everything else,
# a trial the record does not grade included (its answer then is `not_graded`, never a pass). The
# answer is the trial's outcome (the decision, or `missing` / `invalid`). The log header carries
# the metrics Inspect computes over those scores (`accuracy`, `stderr`), beside a note that
# trustbench's own figures, with their intervals, are in the run's record.
#
# The ledger is verified first; an altered ledger is never exported.

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
    # Complete as record.json says it (`core._report_run`): nothing altered or cut AND every
    # planned trial finished. A `--limit` run verifies clean but is not complete (issue 55).
    complete = not verification.problems and len(ledger.trials) == manifest.plan.trials
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
            status="success" if complete else "cancelled",
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
                    "complete": complete,
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


# ------------------------------------------------------------------------------------------------
# Import an Inspect log of the `rtb_review` task as a trustbench run folder, graded by `report`.
#
# `import-inspect LOG --export DIR --out RUN` writes into RUN:
#
# - `inspect-import.toml` and `manifest.json`: an `rtb/review` experiment over the exported
#   corpus with one candidate standing for the Inspect model (kind `inprocess`, entry
#   `replayed_from_inspect`, which refuses to run: the replies come from the log, never from a
#   new call), `trials_per_case` = the log's epochs, and the log's SHA-256, eval id and model
#   in the candidate's settings;
# - `ledger.sqlite`: one trial per sample (trial index = epoch - 1) whose outcome holds the
#   evaluation id and the reply text exactly as Inspect recorded it, one attempt per model call
#   of the sample, then `run_finished`.
#
# `trustbench report RUN` then grades the replies with the reviewer track's own validation and
# metrics; the scores Inspect computed are kept in the outcome for comparison but never read.
#
# Checks before anything is written: every sample id is an evaluation id of the export; each
# sample's input and each of its model calls' input is exactly the messages trustbench would send
# for it (prompt and candidate input), so a reply is never graded against an input the model did
# not see; the graded reply is the output of the last model call. Cases the log has no sample
# for are planned but not run: the report shows them as not run, never as zero.

SPEC_FILE = "inspect-import.toml"
"""The spec `import-inspect` writes and freezes inside the run folder."""
ENTRY = "trustbench.interop._inspect:replayed_from_inspect"
"""In-process entry of an imported candidate (refuses to produce replies)."""


def replayed_from_inspect(settings: dict[str, Any]) -> Any:
    """Entry of an imported candidate: its replies are in the ledger; it can never run again.

    Raises:
        InputError: always (`trustbench run` on an imported run that misses trials).
    """
    raise InputError(
        "this candidate was imported from an Inspect log; its replies are in the ledger and "
        "cannot be produced again (run the Inspect task for the missing cases instead)"
    )


def candidate_name(model: str) -> str:
    """A spec-valid candidate name for an Inspect model id (`openai/gpt-x` -> `openai:gpt-x`)."""
    name = re.sub(r"[^A-Za-z0-9_.:-]", "-", model.replace("/", ":"))
    return name if re.match(r"^[A-Za-z0-9]", name) else f"m{name}"


def _message_texts(messages: list[Any]) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in messages]


def _check_sample(sample: Any, review: ExportedReview, log_path: Path) -> str:
    evaluation_id = str(sample.id)
    where = f"{log_path} sample {evaluation_id} epoch {sample.epoch}"
    if evaluation_id not in review.inputs:
        raise CheckFailed("the sample id is not an evaluation id of this export", location=where)
    sent = sample.input if isinstance(sample.input, list) else None
    expected = [(m["role"], m["content"]) for m in review.messages(evaluation_id)]
    if sent is None or _message_texts(sent) != expected:
        raise CheckFailed(
            "the sample's input is not the exported prompt and candidate input for this id: "
            "its reply cannot be graded against that input",
            location=where,
        )
    # The graded reply must be what the model returned: the output of the sample's last model
    # call. A reply with no call behind it, or one edited after the call, is refused.
    from inspect_ai.event import ModelEvent

    calls = [e for e in sample.events if isinstance(e, ModelEvent)]
    # What each call actually sent (a solver may add messages the dataset does not show).
    if any(_message_texts(call.input) != expected for call in calls):
        raise CheckFailed(
            "a model call of the sample sent messages other than the exported prompt and "
            "candidate input",
            location=where,
        )
    reply = sample.output.completion if sample.output is not None else ""
    if (reply and not calls) or (calls and calls[-1].output.completion != reply):
        raise CheckFailed(
            "the sample's output is not the reply of its last model call", location=where
        )
    return evaluation_id


def wire_roles(sample: Any) -> list[str] | None:
    """The message roles Inspect's last model call of `sample` sent over the wire (None: unknown).

    Inspect records each call's request body (`ModelEvent.call.request`); trustbench sends
    `system` + `user`, Inspect's OpenAI provider may send `developer` + `user` instead.
    """
    from inspect_ai.event import ModelEvent

    calls = [e for e in sample.events if isinstance(e, ModelEvent)]
    request = calls[-1].call.request if calls and calls[-1].call is not None else None
    messages = request.get("messages") if isinstance(request, dict) else None
    if not isinstance(messages, list):
        return None
    return [str(m.get("role")) for m in messages if isinstance(m, dict)]


def _spec_text(review: ExportedReview, name: str, epochs: int, log: Any, digest: str) -> str:
    settings = {
        "reviewer": f"inspect {log.eval.model}",
        "inspect_model": log.eval.model,
        "inspect_eval_id": log.eval.eval_id,
        "inspect_log_sha256": digest,
    }
    setting_text = ", ".join(f"{key} = {json.dumps(value)}" for key, value in settings.items())
    return (
        f'suite = "rtb"\ntrack = "review"\ntrials_per_case = {epochs}\n\n'
        f"[corpus]\npath = {json.dumps(str(review.corpus_root))}\n\n"
        f'[[candidates]]\nname = "{name}"\nkind = "inprocess"\nentry = "{ENTRY}"\n'
        f"settings = {{ {setting_text} }}\n"
    )


def _attempt_rows(sample: Any, trial_id: str) -> list[dict[str, Any]]:
    from inspect_ai.event import ModelEvent

    rows = []
    calls = [e for e in sample.events if isinstance(e, ModelEvent)]
    for index, event in enumerate(calls):
        request = {"messages": [{"role": m.role, "content": m.text} for m in event.input]}
        body = canonical_json(request)
        rows.append(
            {
                "trial_id": trial_id,
                "execution": 1,
                "call_index": index,
                "attempt_index": 0,
                "kind": "first",
                "call": "inspect_model_event",
                "started_at": event.timestamp.isoformat(),
                "request_digest": sha256_hex(body),
                "request": body.decode("utf-8"),
                "raw_response": canonical_json(event.output.model_dump(mode="json")).decode(),
                "error_class": "inspect_model_error" if event.error else None,
                "error_message": event.error,
                "latency_s": event.working_time,
                "prompt_tokens": event.output.usage.input_tokens if event.output.usage else None,
                "completion_tokens": (
                    event.output.usage.output_tokens if event.output.usage else None
                ),
                "requested_model": event.requested_model or event.model,
                "reported_model": event.output.model or None,
            }
        )
    return rows


def _trial_rows(
    key: TrialKey, evaluation_id: str, sample: Any, position: int, model: str
) -> list[tuple[str, dict[str, Any]]]:
    """The ledger rows of one sample: its model calls as attempts, then the finished trial."""
    attempts = _attempt_rows(sample, key.trial_id)
    failed = sample.error is not None
    output = sample.output
    outcome = {
        "evaluation_id": evaluation_id,
        "requested_model": model,
        # The reply exactly as Inspect recorded it; trustbench validates and grades it later.
        "reply": None if failed or output is None else output.completion,
        "reported_model": output.model if output else None,
        "finish_reason": output.stop_reason if output else None,
        "refusal": None,
        "inspect_scores": {k: v.model_dump(mode="json") for k, v in (sample.scores or {}).items()},
        # Inspect may send the system message as role `developer` (o-series, gpt-5 and model
        # names it does not know): what went on the wire, from its own record of the call.
        "inspect_wire_roles": wire_roles(sample),
    }
    trial = {
        "trial_id": key.trial_id,
        "case_id": key.case_id,
        "candidate": key.candidate,
        "trial_index": key.trial_index,
        "execution": 1,
        "order_position": position,
        "status": "failed" if failed else "completed",
        "outcome": canonical_json(outcome).decode("utf-8"),
        "error_class": "inspect_sample_error" if failed else None,
        "error": sample.error.message if failed else None,
        "started_at": sample.started_at or utc_now(),
        "finished_at": sample.completed_at or utc_now(),
        "duration_s": sample.total_time,
        "attempts": len(attempts),
    }
    return [*(("attempts", row) for row in attempts), ("trials", trial)]


def import_inspect_log(
    log_path: Path, export_dir: Path, out_dir: Path, *, corpus: Path | None = None
) -> tuple[Path, int]:
    """Turn an Inspect log of `rtb_review` into a frozen, finished trustbench run folder.

    Returns:
        The run folder and the number of trials imported.

    Raises:
        InputError: Inspect AI is missing, a file is unreadable or not a regular file, or
            `out_dir` already holds a run.
        CheckFailed: a sample does not belong to the export or was sent another input.
    """
    require_inspect()
    from inspect_ai.log import read_eval_log

    if (out_dir / "ledger.sqlite").exists() or (out_dir / "manifest.json").exists():
        raise InputError("already holds a run; import into a new folder", location=str(out_dir))
    review = load_exported_review(export_dir, corpus=corpus)
    raw = read_input_file(log_path)  # a FIFO or a device is refused, never read
    log_format = "json" if log_path.suffix == ".json" else "eval"
    try:
        log = read_eval_log(io.BytesIO(raw), resolve_attachments=True, format=log_format)
    except Exception as error:  # Inspect raises several types for an unreadable log
        raise InputError(f"not a readable Inspect log: {error}", location=str(log_path)) from None
    samples = list(log.samples or [])
    if not samples:
        raise InputError("the log holds no samples", location=str(log_path))
    name = candidate_name(log.eval.model)
    # Every sample is checked before anything is written: a refused log leaves no half run.
    keyed: list[tuple[TrialKey, str, Any]] = []
    for sample in samples:
        evaluation_id = _check_sample(sample, review, log_path)
        key = TrialKey(review.evaluation_map.evaluations[evaluation_id], name, sample.epoch - 1)
        if any(key == other for other, _, _ in keyed):
            raise CheckFailed(f"two samples for trial {key.trial_id}", location=str(log_path))
        keyed.append((key, evaluation_id, sample))
    epochs = max([log.eval.config.epochs or 1, *(s.epoch for s in samples)])
    out_dir.mkdir(parents=True, exist_ok=True)
    spec_path = out_dir / SPEC_FILE
    spec_path.write_text(_spec_text(review, name, epochs, log, sha256_hex(raw)), encoding="utf-8")
    manifest = build_manifest(spec_path)
    write_manifest(manifest, out_dir)
    ledger = Ledger.open(out_dir, manifest.manifest_sha256)
    try:
        ledger.event("run_started", {"source": "inspect", "log": str(log_path.resolve())})
        for position, (key, evaluation_id, sample) in enumerate(keyed):
            ledger.append_many(_trial_rows(key, evaluation_id, sample, position, log.eval.model))
        ledger.event("run_finished", {"source": "inspect", "finished": len(keyed)})
    finally:
        ledger.close()
    return out_dir, len(keyed)
