"""Held-out sets against a determined candidate side (issue 52, deliverables 2 and 3).

The custodian of a set folder can write every file in it but holds neither the owner's key nor
the set's exposure key. Each change the issue tried (a copied set with its log deleted, a
truncated log with a rewritten head, an edited budget, an undone retirement) is refused at
`report` with the owner's key, naming what changed; the report a candidate's developer receives
holds aggregates only, the owner's report the detail. Runs go through `run_spec` in this
process (the owner's key in the environment, so the exposure key is derived from it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.child_env import child_env

from trustbench.core import read_ledger, report_run, run_spec
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.corpus._load import load_corpus
from trustbench.rtb.heldout._crypto import KEY_ENV, new_key_pair
from trustbench.rtb.heldout._pipeline import HEAD_NAME, LOG_NAME, exposure_summary, owner_report
from trustbench.rtb.heldout._seal import HELDOUT_NAME, read_set_manifest, seal_corpus
from trustbench.rtb.heldout.cli import retire

FIXTURE = Path(__file__).parent / "fixtures" / "rtb_v0_2_user"
SPEC = """
suite = "rtb"
track = "review"
trials_per_case = 1
concurrency = 2
timeout_s = 5.0

[corpus]
path = "{corpus}"

[[candidates]]
name = "rev"
kind = "inprocess"
entry = "trustbench.rtb.review.reviewers:chat_responder"
settings = {{ reviewer = "{reviewer}" }}

[analysis]
unit = "case"
"""


@pytest.fixture
def owner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A sealed set (budget 3) in `tmp_path/set`; the owner's key file in the environment."""
    private, public = new_key_pair()
    key = tmp_path / "owner.key"
    key.write_text(private + "\n", encoding="utf-8")
    seal_corpus(FIXTURE, public, tmp_path / "set", budget=3, set_id="hs-custody")
    monkeypatch.setenv(KEY_ENV, str(key))
    return key


def _run(tmp_path: Path, name: str, *, corpus: str = "set", reviewer: str = "reference-policy-v2"):
    spec = tmp_path / f"{name}.toml"
    spec.write_text(SPEC.format(corpus=corpus, reviewer=reviewer), encoding="utf-8")
    return run_spec(spec, tmp_path / name, preflight=False)


def _entries(folder: Path) -> list[str]:
    return (folder / LOG_NAME).read_text(encoding="utf-8").splitlines()


def test_candidate_report_holds_aggregates_only_and_the_owners_report_the_detail(
    tmp_path: Path, owner: Path
) -> None:
    _run(tmp_path, "run")
    run = tmp_path / "run"
    replies = [json.loads(t["outcome"]["reply"]) for t in read_ledger(run).trials]
    written = [reply["explanation"] for reply in replies]  # the candidate's own text
    exported = [t["case_id"] for t in read_ledger(run).trials]  # ids that name an input file
    cases = load_corpus(FIXTURE).cases
    named = [c.case_id for c in cases] + [c.variant for c in cases] + [c.group for c in cases]
    candidate = "".join(
        (run / name).read_text(encoding="utf-8")
        for name in ("report.html", "record.json", "record.trials.jsonl")
    )
    for text in [*named, *exported, *(w[:40] for w in written)]:
        assert text not in candidate, text
    record = json.loads((run / "record.json").read_text(encoding="utf-8"))
    assert "review" not in record and record["trial_rows"]["rows"] == {}
    assert record["held_out_report"] == "candidate"
    assert {f["name"] for f in record["figures"]["rev"]} >= {"false_approval_rate"}
    assert all(f["intervals"] for f in record["figures"]["rev"] if f["estimate"] is not None)

    with owner_report():
        report_run(run, out_dir=tmp_path / "owner")
    detail = "".join(
        (tmp_path / "owner" / name).read_text(encoding="utf-8")
        for name in ("report.html", "record.json", "record.trials.jsonl")
    )
    for text in [*named, *(w[:40] for w in written)]:
        assert text in detail, text
    assert json.loads((run / "record.json").read_text())["held_out_report"] == "candidate"


def test_owner_report_command_needs_the_key_and_writes_apart_from_the_run(
    tmp_path: Path, owner: Path
) -> None:
    _run(tmp_path, "run")
    command = [sys.executable, "-m", "trustbench", "rtb", "heldout", "report", "set"]
    command += ["--run", "run", "--out", "owner"]
    refused = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, check=False,
        env=child_env(tmp_path),
    )  # fmt: skip
    assert refused.returncode == 2 and "private key" in refused.stderr
    assert not (tmp_path / "owner").exists()
    done = subprocess.run(
        [*command, "--key", str(owner)], cwd=tmp_path, capture_output=True, text=True,
        check=False, env=child_env(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "ho-" not in (tmp_path / "run" / "report.html").read_text()
    owners = json.loads((tmp_path / "owner" / "record.json").read_text())
    assert owners["held_out_report"] == "owner" and "review" in owners


def test_a_set_copied_with_its_log_deleted_is_refused_at_report_and_at_run(
    tmp_path: Path, owner: Path
) -> None:
    _run(tmp_path, "run")
    shutil.copytree(tmp_path / "set", tmp_path / "copy")
    for name in (LOG_NAME, HEAD_NAME):
        (tmp_path / "copy" / name).unlink()
        (tmp_path / "set" / name).unlink()  # and the original's log deleted too
    with pytest.raises(CheckFailed, match=r"holds 0 entries .* saw 2 .*log deleted"):
        report_run(tmp_path / "run")
    # Evaluating the copy afresh is refused before anything is shown to a candidate.
    with pytest.raises(InputError, match=r"holds 0 entries .* saw 2"):
        _run(tmp_path, "again", corpus="copy")
    # Even without the owner's witness, the run folder's own authenticated entry is missed.
    (owner.parent / "owner.key.witness.json").unlink()
    with pytest.raises(CheckFailed, match=r"this run's exposure entry 2 .* not in exposure.jsonl"):
        report_run(tmp_path / "run")


def test_a_truncated_log_with_a_rewritten_head_is_refused_at_report(
    tmp_path: Path, owner: Path
) -> None:
    _run(tmp_path, "run")
    saved_head = (tmp_path / "set" / HEAD_NAME).read_text()
    _run(tmp_path, "run")  # a second run of the same folder: a third entry
    log = tmp_path / "set" / LOG_NAME
    lines = _entries(tmp_path / "set")
    assert [json.loads(line)["kind"] for line in lines] == ["freeze", "run", "run"]
    log.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
    second = json.loads(lines[1])["hash"]
    (tmp_path / "set" / HEAD_NAME).write_text(f"2 {second}\n", encoding="ascii")
    with pytest.raises(CheckFailed, match=r"exposure.head was rewritten without the set's"):
        report_run(tmp_path / "run")
    # The head put back as it was after the first run is authentic, but the log lost a run.
    (tmp_path / "set" / HEAD_NAME).write_text(saved_head, encoding="ascii")
    with pytest.raises(CheckFailed, match=r"holds 2 entries .* saw 3 .*truncated"):
        report_run(tmp_path / "run")


def test_an_edited_budget_is_refused_at_report_naming_the_budget(
    tmp_path: Path, owner: Path
) -> None:
    manifest_path = tmp_path / "set" / HELDOUT_NAME
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "budget": 1000}), encoding="utf-8")
    with pytest.raises(CheckFailed, match=r"HELDOUT.json budget is 1000 but the seal binds 3"):
        _run(tmp_path, "run")  # runs (the runner cannot open the seal), refused at its report


def test_an_undone_retirement_is_refused_at_report_and_a_retired_set_runs_nothing(
    tmp_path: Path, owner: Path
) -> None:
    _run(tmp_path, "run")
    head = (tmp_path / "set" / HEAD_NAME).read_text()
    lines = _entries(tmp_path / "set")
    retire(tmp_path / "set", "cases published", key=owner, by="owner")
    with pytest.raises(InputError, match="retired"):
        _run(tmp_path, "run")  # frozen before the retirement: refused all the same
    (tmp_path / "set" / LOG_NAME).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "set" / HEAD_NAME).write_text(head, encoding="ascii")
    with pytest.raises(CheckFailed, match="retirement undone"):
        report_run(tmp_path / "run")


def test_every_run_counts_with_its_distinct_candidate_code(tmp_path: Path, owner: Path) -> None:
    _run(tmp_path, "first")
    _run(tmp_path, "second")  # the identical spec frozen into a new folder: exposed again
    summary = exposure_summary(tmp_path / "set", read_set_manifest(tmp_path / "set"))
    assert (summary["runs"], summary["distinct_candidate_code"]) == (2, 1)
    result = _run(tmp_path, "third", reviewer="always-permit")
    held = json.loads(result.report.record_path.read_text())["held_out_set"]
    assert (held["runs"], held["distinct_candidate_code"], held["budget"]) == (3, 2, 3)
