"""Import an Inspect log of the `rtb_review` task as a trustbench run folder, graded by `report`.

`import-inspect LOG --export DIR --out RUN` writes into RUN:

- `inspect-import.toml` and `manifest.json`: an `rtb/review` experiment over the exported
  corpus with one candidate standing for the Inspect model (kind `inprocess`, entry
  `replayed_from_inspect`, which refuses to run: the replies come from the log, never from a
  new call), `trials_per_case` = the log's epochs, and the log's SHA-256, eval id and model
  in the candidate's settings;
- `ledger.sqlite`: one trial per sample (trial index = epoch - 1) whose outcome holds the
  evaluation id and the reply text exactly as Inspect recorded it, one attempt per model call
  of the sample, then `run_finished`.

`trustbench report RUN` then grades the replies with the reviewer track's own validation and
metrics; the scores Inspect computed are kept in the outcome for comparison but never read.

Checks before anything is written: every sample id is an evaluation id of the export; each
sample's input and each of its model calls' input is exactly the messages trustbench would send
for it (prompt and candidate input), so a reply is never graded against an input the model did
not see; the graded reply is the output of the last model call. Cases the log has no sample
for are planned but not run: the report shows them as not run, never as zero.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from trustbench._canonical import canonical_json, read_input_file, sha256_hex
from trustbench.core import Ledger, TrialKey, build_manifest, utc_now, write_manifest
from trustbench.errors import CheckFailed, InputError
from trustbench.interop._inspect import require_inspect
from trustbench.interop._rtb_export import ExportedReview, load_exported_review

SPEC_FILE = "inspect-import.toml"
"""The spec `import-inspect` writes and freezes inside the run folder."""
ENTRY = "trustbench.interop._inspect_import:replayed_from_inspect"
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
