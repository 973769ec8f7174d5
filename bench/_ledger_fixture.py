"""A synthetic, chain-valid ledger of the reviewer workload, as a long interrupted run leaves it.

Rows are shaped exactly as `trustbench run` writes them for `rtb/review` (one attempt per trial
with the real ~7 kB review request and a valid reviewer reply), chained with the real `Ledger`,
but committed in batches (same rows and hashes, far faster to generate). The last `unfinished`
trials of the seeded order have no trial row; the first ten of those have an attempt (executions
interrupted mid-trial, to be marked abandoned on resume). With none unfinished the ledger ends
with the run's `run_finished` sign-off, so `report` reads it as a complete run.

The reference reviewer is deterministic: its replies to one case differ only in their fresh
evaluation id, and `report` grades each distinct reply of a case once. With `distinct_replies`
every reply's explanation also names its trial, so no two replies are alike and every one is
graded in full, as for a sampling model (the slower, more common case).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from bench._common import candidate_names, spec_text
from bench._workload import corpus, reference_reply, review_messages
from trustbench._canonical import canonical_json, sha256_hex
from trustbench.core import TrialKey, build_manifest, trial_order, write_manifest
from trustbench.core.ledger._store import Ledger, utc_now
from trustbench.rtb.corpus import new_evaluation_id

BATCH = 5_000


def outcome_json(evaluation_id: str, raw_response: str) -> str:
    """The trial outcome `rtb/review` records for a reply (canonical JSON text)."""
    reply = json.loads(raw_response)["choices"][0]["message"]["content"]
    outcome = {
        "evaluation_id": evaluation_id, "requested_model": "bench-reviewer", "reply": reply,
        "reported_model": "bench-reviewer", "finish_reason": "stop", "refusal": None,
    }  # fmt: skip
    return canonical_json(outcome).decode()


def _distinct(raw: str, position: int) -> str:
    """`raw` with its reply's explanation naming the trial (a reply no other trial gives)."""
    marker = '\\"explanation\\": \\"'  # inside the raw response, the reply is a JSON string
    return raw.replace(marker, f"{marker}Trial {position}. ", 1)


def write_ledger(
    run_dir: Path,
    *,
    cases: int,
    trials_per_case: int,
    unfinished: int,
    candidates: int = 1,
    distinct_replies: bool = False,
) -> dict[str, Any]:
    """Freeze the bench workload (`candidates` identical reviewers) into `run_dir` and write its
    ledger; return counts."""
    ids = random.Random(11)  # reproducible 128-bit evaluation ids, shaped as the track's
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "spec.toml").write_text(
        spec_text(
            base_url="http://127.0.0.1:9/v1",
            cases=cases,
            trials_per_case=trials_per_case,
            concurrency=64,
            candidates=candidates,
        )
    )
    manifest = build_manifest(run_dir / "spec.toml")
    write_manifest(manifest, run_dir)
    keys = [
        TrialKey(case.case_id, name, index)
        for case in corpus().cases[:cases]
        for name in candidate_names(candidates)
        for index in range(trials_per_case)
    ]
    order = trial_order(keys, manifest.spec.order_seed)
    position_of = {case.case_id: i for i, case in enumerate(corpus().cases)}
    templates: dict[str, tuple[str, str, str]] = {}
    ledger = Ledger.open(run_dir, manifest.manifest_sha256)
    ledger.event("run_started", {"planned": len(keys), "synthetic": True})
    batch: list[tuple[str, dict[str, Any]]] = []
    finished_count = len(order) - unfinished
    for position, key in enumerate(order):
        if position >= finished_count + 10:
            break
        template = templates.get(key.case_id)
        if template is None:
            messages, candidate_input = review_messages(position_of[key.case_id])
            eid = candidate_input.evaluation_id
            body = {"model": "bench-reviewer", "messages": messages, "temperature": 0.0}
            reply = reference_reply(body)
            raw = canonical_json(
                {"choices": [{"message": {"role": "assistant", "content": reply}}]}
            ).decode()
            template = (eid, canonical_json(body).decode(), raw)
            templates[key.case_id] = template
        eid0, request0, raw0 = template
        eid = new_evaluation_id(ids)
        request = request0.replace(eid0, eid)
        raw = raw0.replace(eid0, eid)
        if distinct_replies:
            raw = _distinct(raw, position)
        now = utc_now()
        batch.append(
            (
                "attempts",
                {
                    "trial_id": key.trial_id, "execution": 1, "call_index": 0,
                    "attempt_index": 0, "kind": "first", "call": "chat", "started_at": now,
                    "request_digest": sha256_hex(request.encode()), "request": request,
                    "raw_response": raw, "http_status": 200,
                    "error_class": None, "error_message": None, "latency_s": 0.05,
                    "prompt_tokens": 1500, "completion_tokens": 60, "cost_usd": None,
                    "requested_model": "bench-reviewer", "reported_model": "bench-reviewer",
                    "endpoint": "http://127.0.0.1:9/v1/chat/completions",
                },
            )
        )  # fmt: skip
        if position < finished_count:
            batch.append(
                (
                    "trials",
                    {
                        "trial_id": key.trial_id, "case_id": key.case_id,
                        "candidate": key.candidate, "trial_index": key.trial_index,
                        "execution": 1, "order_position": position, "status": "completed",
                        "outcome": outcome_json(eid, raw),
                        "error_class": None, "error": None, "started_at": now,
                        "finished_at": now, "duration_s": 0.05, "attempts": 1,
                    },
                )
            )  # fmt: skip
        if len(batch) >= BATCH:
            ledger.append_many(batch)
            batch = []
    if batch:
        ledger.append_many(batch)
    if unfinished == 0:  # a finished run signs off, as `trustbench run` does (else: interrupted)
        ledger.event("run_finished", {"finished": finished_count, "head": ledger.head})
    ledger.close()
    return {
        "planned": len(keys),
        "finished": finished_count,
        "interrupted": min(unfinished, 10),
        "bytes": (run_dir / "ledger.sqlite").stat().st_size,
    }
