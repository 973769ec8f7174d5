"""`report` streams the ledger: the streamed trials, and every figure graded from them, are
exactly those of reading the whole ledger at once (issue 30: memory bounded by the work in
flight, not by the run)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tests.rtb.test_review_track import POLICY, inprocess, run_spec, spec_text
from tests.support.crash import crash_after_seq
from tests.support.records import full_record

from trustbench.core import (
    load_track,
    open_ledger,
    read_ledger,
    read_manifest,
    report_run,
    run_experiment,
)

_PERMIT = inprocess("always-permit", "always-permit")


def _interrupted_then_resumed(tmp_path: Path) -> Path:
    """A 2-candidate, K = 2 run killed between an attempt and its trial row, then resumed.

    The killed execution's attempt stays in the ledger, abandoned: it must not count.
    """
    chain = '{ name = "chained", members = ["reference-policy", "always-permit"] }'
    run_dir = run_spec(tmp_path, spec_text(POLICY + _PERMIT, trials=2, chains=chain))
    with sqlite3.connect(run_dir / "ledger.sqlite") as db:
        (seq,) = db.execute(
            "SELECT MIN(a.seq) FROM attempts a JOIN trials t ON a.trial_id = t.trial_id"
            " WHERE t.seq > a.seq AND a.seq > 20"
        ).fetchone()
    db.close()
    assert seq is not None
    crash_after_seq(run_dir, seq)
    run_experiment(run_dir)
    return run_dir


def _eager_pairs(run_dir: Path) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    ledger = read_ledger(run_dir, attempt_texts=False)
    return [(trial, ledger.attempts_of(trial["trial_id"])) for trial in ledger.trials]


def test_streamed_trials_and_counted_attempts_equal_the_whole_ledger_read(tmp_path: Path) -> None:
    run_dir = _interrupted_then_resumed(tmp_path)
    whole = read_ledger(run_dir, attempt_texts=False)
    abandoned = [a for a in whole.attempts if not a["counted"]]
    assert abandoned, "the fixture must leave an abandoned attempt"
    streamed = list(open_ledger(run_dir, attempt_texts=False).iter_trials())
    assert streamed == _eager_pairs(run_dir)
    assert all(a["trial_id"] != abandoned[0]["trial_id"] or a["execution"] == 2
               for _, attempts in streamed for a in attempts)  # fmt: skip
    assert open_ledger(run_dir).finished_count == len(whole.trials)
    with_texts = list(open_ledger(run_dir).iter_trials())
    whole_texts = read_ledger(run_dir)
    assert with_texts == [(t, whole_texts.attempts_of(t["trial_id"])) for t in whole_texts.trials]


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=lambda v: v.model_dump(mode="json")))


def test_report_figures_from_the_stream_equal_grading_the_whole_ledger(tmp_path: Path) -> None:
    run_dir = _interrupted_then_resumed(tmp_path)
    manifest = read_manifest(run_dir)
    track, _ = load_track(manifest.spec.track_id)
    # The straightforward computation: every row read into lists, then graded.
    eager = track.analyze(manifest, read_ledger(run_dir, attempt_texts=False))
    eager_rows = [dict(row, part="review") for row in eager.trial_rows["review"]]
    report_run(run_dir)
    record = json.loads((run_dir / "record.json").read_text())
    streamed = {s: [f for f in figs if f["name"] != "valid_response_rate"]
                for s, figs in record["figures"].items()}  # fmt: skip
    assert streamed == _jsonable(eager.subjects)
    assert record["review"] == _jsonable(eager.record["review"])
    rows = [json.loads(line) for line in (run_dir / "record.trials.jsonl").read_text().splitlines()]
    assert rows == _jsonable(eager_rows)
    assert record["finished_trials"] == record["planned_trials"] == 12 * 2 * 2
    assert len(full_record(run_dir)["review"]["trials"]) == 12 * 2 * 4  # 4 configurations
