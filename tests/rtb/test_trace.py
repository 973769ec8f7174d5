"""`rtb trace`: one case or stateful fault traced across reviewer, control and workflow runs."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from tests.support.cli import invoke

CASE = "c-7fxsex98k3"
"""A v0.3 case both stateful tracks seed `checkpoint_replay_after_revocation` on (seed 0)."""
FAULT = "checkpoint_replay_after_revocation"

_HEAD = """
suite = "rtb"
track = "{track}"
trials_per_case = 1
concurrency = 4
timeout_s = 30.0
order_seed = 3

[corpus]
builtin = "{corpus}"

[track_options]
{options}
"""
_REVIEWER = """
[[candidates]]
name = "{name}"
kind = "inprocess"
entry = "trustbench.rtb.review.reviewers:chat_responder"
settings = {{ reviewer = "{reviewer}" }}
"""
_BOUNDARY = """
[[candidates]]
name = "{name}"
kind = "inprocess"
settings = {{ boundary = "{name}" }}
"""
_AGENT = """
[[candidates]]
name = "{agent}-reference"
kind = "inprocess"
settings = {{ agent = "{agent}", boundary = "reference" }}
"""


def _run(folder: Path, spec_text: str) -> Path:
    spec = folder.with_suffix(".toml")
    spec.write_text(spec_text)
    assert invoke("freeze", str(spec), "--out", str(folder))[0] == 0
    assert invoke("run", str(folder), "--quiet")[0] == 0
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Small finished runs of the three tracks on v0.3, and a reviewer run on v0.1."""
    root = tmp_path_factory.mktemp("trace")
    review = _HEAD.format(track="review", corpus="v0.3", options=f'cases = ["{CASE}"]')
    review += _REVIEWER.format(name="reference-policy", reviewer="reference-policy-v3")
    review += _REVIEWER.format(name="always-permit", reviewer="always-permit")
    control = _HEAD.format(track="control", corpus="v0.3", options=f'paths = ["{FAULT}"]')
    control += _BOUNDARY.format(name="reference") + _BOUNDARY.format(name="unchecked")
    scenarios = f'scenarios = ["{CASE}/{FAULT}", "{CASE}/direct"]'
    workflow = _HEAD.format(track="workflow", corpus="v0.3", options=scenarios)
    workflow += _AGENT.format(agent="honest") + _AGENT.format(agent="reckless")
    other = _HEAD.format(track="review", corpus="v0.1", options='cases = ["dns_changes-01-*"]')
    other += _REVIEWER.format(name="always-permit", reviewer="always-permit")
    return {
        "review": _run(root / "review", review),
        "control": _run(root / "control", control),
        "workflow": _run(root / "workflow", workflow),
        "other": _run(root / "other", other),
    }


def _three(runs: dict[str, Path]) -> list[str]:
    return [str(runs["review"]), str(runs["control"]), str(runs["workflow"])]


def _ledger_trial_ids(run: Path) -> set[str]:
    connection = sqlite3.connect(run / "ledger.sqlite")
    try:
        return {row[0] for row in connection.execute("SELECT trial_id FROM trials")}
    finally:
        connection.close()


def test_trace_on_a_stateful_fault_prints_the_three_tracks_rows_and_exits_0(
    runs: dict[str, Path],
) -> None:
    code, out = invoke("rtb", "trace", *_three(runs), "--case", CASE, "--fault", FAULT)
    assert code == 0, out
    detect, stop, prove = (out.index(word) for word in ("detect:", "stop:", "prove:"))
    assert detect < stop < prove
    reviewer_part, control_part, workflow_part = out[detect:stop], out[stop:prove], out[prove:]
    assert f"trial {CASE}/reference-policy/0" in reviewer_part and "permit" in reviewer_part
    # The observer's verdict, with the boundary's claim beside it: unchecked lets the replay
    # through, the reference boundary blocks it.
    assert f"trial {CASE}/{FAULT}/unchecked/0" in control_part
    assert "observer: prohibited_effect" in control_part and "observer: prevented" in control_part
    assert f"trial {CASE}/{FAULT}/honest-reference/0" in workflow_part
    assert "evidence" in workflow_part and f"{CASE}/direct" not in workflow_part


def test_trace_json_names_each_rows_run_and_ledger_trial(runs: dict[str, Path]) -> None:
    code, out = invoke("rtb", "trace", *_three(runs), "--case", CASE, "--fault", FAULT, "--json")
    assert code == 0, out
    traced = json.loads(out)
    assert traced["corpus"]["version"] == "0.3" and len(traced["corpus"]["manifest_sha256"]) == 64
    for entry in traced["runs"]:
        assert entry["rows"], entry
        ledger_ids = _ledger_trial_ids(Path(entry["run"]))
        for row in entry["rows"]:
            assert set(row["trial_id"].split(" + ")) <= ledger_ids


def test_a_fault_not_seeded_on_the_case_says_no_row_for_this_case(runs: dict[str, Path]) -> None:
    code, out = invoke("rtb", "trace", *_three(runs), "--case", CASE, "--fault", "poisoned_memory")
    assert code == 0, out
    assert out.count("no row for this case in this track") == 2  # control and workflow


def test_runs_of_another_corpus_are_refused_naming_the_mismatch(runs: dict[str, Path]) -> None:
    code, message = invoke("rtb", "trace", str(runs["control"]), str(runs["other"]), "--case", CASE)
    assert code == 2
    assert "different corpora" in message and "0.3" in message and "0.1" in message
    assert "MANIFEST sha256" in message


def test_a_case_absent_from_a_run_is_refused_naming_the_run(runs: dict[str, Path]) -> None:
    code, message = invoke("rtb", "trace", str(runs["workflow"]), "--case", "c-0tpeh12hj9")
    assert code == 2 and "absent" in message and str(runs["workflow"]) in message


def test_an_unknown_fault_kind_is_refused(runs: dict[str, Path]) -> None:
    code, message = invoke("rtb", "trace", str(runs["control"]), "--case", CASE, "--fault", "x")
    assert code == 2 and "--fault" in message


def test_a_tampered_ledger_is_refused(runs: dict[str, Path], tmp_path: Path) -> None:
    tampered = tmp_path / "control"
    shutil.copytree(runs["control"], tampered)
    connection = sqlite3.connect(tampered / "ledger.sqlite")
    with connection:
        connection.execute("UPDATE trials SET status = 'failed' WHERE id = 1")
    connection.close()
    code, message = invoke("rtb", "trace", str(tampered), "--case", CASE, "--fault", FAULT)
    assert code == 1 and "does not verify" in message
