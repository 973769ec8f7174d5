"""A sealed held-out set as the corpus of an ordinary RTB experiment (issue #33), end to end.

Seal a corpus, freeze and run a reviewer on it with only the set's exposure key in the
environment (it opens nothing), report with the owner's key; the exposure log counts every run
(a killed run included), a tampered log is caught, and a retired set says so in every verdict
line. Issue 52: the candidate's report holds aggregates only, the owner's report the detail, and
a custodian's changes to the set folder are refused at `report`, naming what changed.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.child_env import child_env

import trustbench
from trustbench.core import read_ledger
from trustbench.rtb.corpus._load import load_corpus
from trustbench.rtb.heldout._crypto import KEY_ENV, exposure_key, new_key_pair
from trustbench.rtb.heldout._pipeline import (
    EXPOSURE_KEY_ENV,
    HEAD_NAME,
    LOG_NAME,
    exposure_summary,
    log_problems,
)
from trustbench.rtb.heldout._seal import read_set_manifest, seal_corpus

FIXTURE = Path(__file__).parent / "fixtures" / "rtb_v0_2_user"
SET_ID = "hs-pipeline"
SPEC = """
suite = "rtb"
track = "{track}"
trials_per_case = {trials}
concurrency = 2
timeout_s = 5.0

[corpus]
path = "set"

[[candidates]]
name = "ref"
kind = "inprocess"
entry = "trustbench.rtb.review.reviewers:chat_responder"
settings = {{ reviewer = "reference-policy-v2" }}

[analysis]
unit = "case"
{options}
"""


def _spec(tmp_path: Path, name: str, trials: int = 1, reason: str = "", track: str = "review"):
    options = f'[track_options]\nheldout_reason = "{reason}"\n' if reason else ""
    path = tmp_path / f"{name}.toml"
    path.write_text(SPEC.format(track=track, trials=trials, options=options), encoding="utf-8")
    return path


@pytest.fixture
def sealed(tmp_path: Path) -> Path:
    """A sealed set (budget 1) in `tmp_path/set`; the owner's key in `tmp_path/owner.key`, the
    set's exposure key (the evaluation operator's) in `tmp_path/exposure.key`."""
    private, public = new_key_pair()
    (tmp_path / "owner.key").write_text(private + "\n", encoding="utf-8")
    (tmp_path / "exposure.key").write_text(exposure_key(private, SET_ID) + "\n", encoding="utf-8")
    seal_corpus(FIXTURE, public, tmp_path / "set", budget=1, set_id=SET_ID, at="2026-12-01")
    return tmp_path / "set"


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`trustbench ARGS` in `tmp_path`: the exposure key in the environment, no owner's key."""
    env = child_env(tmp_path, extra={EXPOSURE_KEY_ENV: str(tmp_path / "exposure.key")})
    return subprocess.run(
        [sys.executable, "-m", "trustbench", *args],
        cwd=tmp_path, capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _summary(folder: Path) -> dict:
    return exposure_summary(folder, read_set_manifest(folder))


def test_reviewer_runs_without_the_key_and_the_owner_reports_with_it(
    tmp_path: Path, sealed: Path
) -> None:
    spec = _spec(tmp_path, "spec", trials=2)
    frozen = _ok(_cli(tmp_path, "freeze", str(spec), "--out", "run"))
    assert f"note: held-out set {SET_ID}: run 0 times (budget 1)" in frozen
    ran = _ok(_cli(tmp_path, "run", "run", "--quiet"))
    assert "10/10 trials finished" in ran and "frozen by" in ran

    refused = _cli(tmp_path, "report", "run")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    message = " ".join(refused.stderr.split())
    assert "--heldout-key" in message and KEY_ENV in message and "private key" in message
    assert not (tmp_path / "run" / "record.json").exists()

    summary = json.loads(
        _ok(_cli(tmp_path, "report", "run", "--heldout-key", "owner.key", "--json"))
    )
    held = summary["held_out_set"]
    assert (held["set_id"], held["case_count"], held["runs"], held["budget"]) == (
        SET_ID, 5, 1, 1,
    )  # fmt: skip
    assert held["distinct_candidate_code"] == 1 and held["log_authenticated"] is True
    assert held["answer_key_available_to_candidate"] is False and held["retired"] is False
    headline = summary["verdicts"]["ref"]["headline"]
    assert headline.startswith(f"held-out set {SET_ID}: run 1 times (budget 1) by 1 distinct ")
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    assert record["held_out_set"] == held
    # Graded against the sealed answer key: the reference reviewer decides every case right.
    correct = {f["name"]: f["estimate"] for f in record["figures"]["ref"]}
    assert correct["correct_decision_rate"] == 1.0
    page = (tmp_path / "run" / "report.html").read_text()
    assert "Held-out set: what was withheld and why" in page
    assert "run 1 times (budget 1)" in page and "answer key available" in page
    assert _ok(_cli(tmp_path, "verify", "run")).startswith("intact")


def test_the_candidate_side_holds_no_label_to_look_up(tmp_path: Path, sealed: Path) -> None:
    """What a candidate can reach: the messages it was sent, the set, the run, the package."""
    _ok(_cli(tmp_path, "freeze", str(_spec(tmp_path, "spec")), "--out", "run"))
    _ok(_cli(tmp_path, "run", "run", "--quiet"))
    ledger = read_ledger(tmp_path / "run")
    sent = [json.loads(a["request"]["messages"][-1]["content"]) for a in ledger.attempts]
    assert len({json.dumps({**i, "evaluation_id": ""}) for i in sent}) == 5  # five cases
    reachable = [p for p in [*sealed.rglob("*"), *(tmp_path / "run").rglob("*")] if p.is_file()]
    blob = b"\n".join(p.read_bytes() for p in reachable if p.name != "ledger.sqlite")
    blob += json.dumps([ledger.trials, ledger.attempts, ledger.events], default=str).encode()
    for case in load_corpus(FIXTURE).cases:
        assert case.case_id.encode() not in blob
        assert case.expectations.model_dump_json().encode() not in blob
    assert b"reference_decision" not in blob and b'"expectations"' not in blob
    # The lookup attack on the installed package: a file holding every value of a sent input
    # and an answer field would give that input's label. None does.
    package = [p.read_bytes() for p in Path(trustbench.__file__).parent.rglob("*") if p.is_file()]
    for sent_input in sent:
        keys = [v.encode() for v in _leaves({**sent_input, "evaluation_id": ""}) if len(v) > 5]
        assert not [
            data
            for data in package
            if b"reference_decision" in data and all(key in data for key in keys)
        ]


def _leaves(value: object) -> list[str]:
    """Every text and number of a JSON value, as text."""
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [] if value is None else [str(value)]


def test_exposure_count_survives_a_run_killed_at_its_first_trial(
    tmp_path: Path, sealed: Path
) -> None:
    spec = _spec(tmp_path, "spec", reason="resumed after a crash")
    _ok(_cli(tmp_path, "freeze", str(spec), "--out", "run"))
    code = (
        "import os, sys; from pathlib import Path; import trustbench.core._runner as r\n"
        "async def killed(*a, **k): os.kill(os.getpid(), 9)\n"
        "r.execute_trial = killed\n"
        f"r.run_experiment(Path({str(tmp_path / 'run')!r}))\n"
    )
    env = child_env(tmp_path, extra={EXPOSURE_KEY_ENV: str(tmp_path / "exposure.key")})
    killed = subprocess.run([sys.executable, "-c", code], check=False, env=env)
    assert killed.returncode == -9
    assert read_ledger(tmp_path / "run").trials == []  # killed before any trial finished
    assert log_problems(sealed, read_set_manifest(sealed)) == []
    assert _summary(sealed)["runs"] == 1
    # The resume shows the inputs again: it counts as a run of its own (past the budget, with
    # the spec's reason).
    _ok(_cli(tmp_path, "run", "run", "--quiet"))
    assert (_summary(sealed)["runs"], _summary(sealed)["experiments"]) == (2, 1)
    kinds = [json.loads(line)["kind"] for line in (sealed / LOG_NAME).read_text().splitlines()]
    assert kinds == ["freeze", "run", "run"]


def test_a_refused_resume_leaves_the_exposure_log_byte_identical(
    tmp_path: Path, sealed: Path
) -> None:
    _ok(_cli(tmp_path, "freeze", str(_spec(tmp_path, "spec", trials=2)), "--out", "run"))
    _ok(_cli(tmp_path, "run", "run", "--quiet", "--limit", "1"))  # trials left to resume
    with sqlite3.connect(tmp_path / "run" / "ledger.sqlite") as connection:
        connection.execute("UPDATE trials SET outcome = 'edited' WHERE id = 1")
    connection.close()
    before = {name: (sealed / name).read_bytes() for name in (LOG_NAME, HEAD_NAME)}
    refused = _cli(tmp_path, "run", "run", "--quiet")
    assert refused.returncode == 1 and "refus" in refused.stderr, refused.stderr
    # Nothing ran, so nothing is counted: the log and its head are as they were.
    assert {name: (sealed / name).read_bytes() for name in (LOG_NAME, HEAD_NAME)} == before
    assert _summary(sealed)["runs"] == 1


def test_runs_past_the_budget_need_a_reason_recorded_and_printed(
    tmp_path: Path, sealed: Path
) -> None:
    first = str(_spec(tmp_path, "first"))
    _ok(_cli(tmp_path, "freeze", first, "--out", "run1"))
    _ok(_cli(tmp_path, "freeze", first, "--out", "run1"))  # the same experiment: one entry
    _ok(_cli(tmp_path, "run", "run1", "--quiet"))
    refused = _cli(tmp_path, "freeze", str(_spec(tmp_path, "second", trials=2)), "--out", "run2")
    assert refused.returncode == 2 and "budget 1" in refused.stderr
    assert "heldout_reason" in refused.stderr and not (tmp_path / "run2").exists()
    # The identical spec frozen into a new folder is refused too: its run would expose again.
    assert _cli(tmp_path, "freeze", first, "--out", "copy").returncode == 2
    third = str(_spec(tmp_path, "third", trials=2))
    frozen = _ok(_cli(tmp_path, "freeze", third, "--out", "run3", "--reason", "grader fix re-run"))
    assert "over-budget reason recorded: grader fix re-run" in frozen
    # The reason may be declared in the spec instead (frozen with it).
    fourth = _spec(tmp_path, "fourth", trials=3, reason="second look")
    frozen = _ok(_cli(tmp_path, "freeze", str(fourth), "--out", "r4"))
    assert "reason recorded: second look" in frozen
    _ok(_cli(tmp_path, "run", "run3", "--quiet"))
    report = _ok(_cli(tmp_path, "report", "run3", "--heldout-key", "owner.key"))
    assert "run 2 times (budget 1)" in report and "OVER BUDGET" in report
    assert "reason recorded: grader fix re-run" in report
    record = json.loads((tmp_path / "run3" / "record.json").read_text())
    assert record["held_out_set"]["over_budget_reasons"] == ["grader fix re-run"]
    # Two runs of one reviewer's code: one distinct candidate code.
    assert record["held_out_set"]["distinct_candidate_code"] == 1


def test_tampered_exposure_log_is_detected_and_stops_run_and_report(
    tmp_path: Path, sealed: Path
) -> None:
    _ok(_cli(tmp_path, "freeze", str(_spec(tmp_path, "spec")), "--out", "run"))
    _ok(_cli(tmp_path, "run", "run", "--quiet"))
    log = sealed / LOG_NAME
    lines = log.read_text().splitlines()
    log.write_text(lines[0] + "\n")  # the run entry dropped, the head left as it was
    verified = _cli(tmp_path, "rtb", "heldout", "verify", str(sealed))
    assert verified.returncode == 1 and "truncated" in verified.stderr
    report = _cli(tmp_path, "report", "run", "--heldout-key", "owner.key")
    assert report.returncode == 1 and "truncated" in report.stderr
    log.write_text("\n".join([lines[0].replace('"trials":1', '"trials":0'), lines[1]]) + "\n")
    assert _cli(tmp_path, "rtb", "heldout", "verify", str(sealed)).returncode == 1
    rerun = _cli(tmp_path, "run", "run", "--quiet")
    assert rerun.returncode == 2 and "tampered" in rerun.stderr


def test_retired_set_says_so_in_every_verdict_line_and_refuses_every_run(
    tmp_path: Path, sealed: Path
) -> None:
    _ok(_cli(tmp_path, "freeze", str(_spec(tmp_path, "spec")), "--out", "run"))
    _ok(_cli(tmp_path, "run", "run", "--quiet"))
    _ok(_cli(tmp_path, "rtb", "retire", str(sealed), "--reason", "cases published",
             "--key", "owner.key"))  # fmt: skip
    summary = json.loads(
        _ok(_cli(tmp_path, "report", "run", "--heldout-key", "owner.key", "--json"))
    )
    assert summary["held_out_set"]["retired"] is True
    assert summary["held_out_set"]["retired_reason"] == "cases published"
    assert summary["verdicts"]["ref"]["headline"].startswith("RETIRED (exposed: cases published)")
    page = (tmp_path / "run" / "report.html").read_text()
    assert "RETIRED (exposed: cases published)" in page
    again = _cli(tmp_path, "freeze", str(_spec(tmp_path, "new", trials=3)), "--out", "run2")
    assert again.returncode == 2 and "retired" in again.stderr
    # An experiment frozen before the retirement runs no more either.
    rerun = _cli(tmp_path, "run", "run", "--quiet")
    assert rerun.returncode == 2 and "retired" in rerun.stderr


def test_run_spec_api_counts_its_run_and_other_rtb_tracks_refuse_a_sealed_set(
    tmp_path: Path, sealed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trustbench.core import run_spec

    monkeypatch.setenv(KEY_ENV, str(tmp_path / "owner.key"))
    result = run_spec(_spec(tmp_path, "spec"), tmp_path / "run")
    held = json.loads(result.report.record_path.read_text())["held_out_set"]
    assert held["runs"] == 1
    # The key was in the run's environment, within an in-process candidate's reach: said so.
    assert held["answer_key_available_to_candidate"] is True
    assert "YES" in " ".join(result.report.html_path.read_text().split())
    assert _summary(sealed)["runs"] == 1
    refused = _cli(tmp_path, "freeze", str(_spec(tmp_path, "c", track="control")), "--out", "c")
    assert refused.returncode == 2 and "cannot run a sealed held-out set" in refused.stderr


def test_export_needs_no_key_and_audits_refuse_without_it(tmp_path: Path, sealed: Path) -> None:
    from trustbench.rtb.heldout._pipeline import corpus_with_labels

    exported = _ok(_cli(tmp_path, "rtb", "export", "--corpus", "set", "--out", "exp"))
    assert "exported 5 candidate inputs" in exported
    assert sorted(p.name for p in (tmp_path / "exp" / "inputs").iterdir()) == sorted(
        p.name for p in (sealed / "inputs").iterdir()
    )
    assert not (tmp_path / "exp" / "grader").exists()
    refused = _cli(tmp_path, "rtb", "audit", "--corpus", "set")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "--heldout-key" in refused.stderr and KEY_ENV in refused.stderr
    # With the key, the audits read the very corpus that was sealed.
    with corpus_with_labels(sealed, tmp_path / "owner.key", "the audit") as opened:
        assert opened.manifest_sha256 == load_corpus(FIXTURE).manifest_sha256
