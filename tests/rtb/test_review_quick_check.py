"""A quick check: a declared case filter (frozen) and `run --limit` (the rest stays unrun)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.cli import invoke

from trustbench.core import build_manifest, read_ledger
from trustbench.errors import InputError


def _spec(tmp_path: Path, options: str = "") -> Path:
    spec = tmp_path / "exp.toml"
    spec.write_text(
        f"""
suite = "rtb"
track = "review"
trials_per_case = 2
concurrency = 4
timeout_s = 10.0
order_seed = 3

[corpus]
builtin = "v0.1"

[retry]
transport_max_retries = 0
candidate_resample = 0

{options}

[[candidates]]
name = "reference-policy"
kind = "inprocess"
entry = "trustbench.rtb.review.reviewers:chat_responder"
settings = {{ reviewer = "reference-policy" }}

[[candidates]]
name = "always-permit"
kind = "inprocess"
entry = "trustbench.rtb.review.reviewers:chat_responder"
settings = {{ reviewer = "always-permit" }}
"""
    )
    return spec


def test_a_case_filter_is_frozen_and_plans_only_the_matching_cases(tmp_path: Path) -> None:
    spec = _spec(tmp_path, '[track_options]\ncases = ["dns_changes-*", "vm_deletion-01-permitted"]')
    manifest = build_manifest(spec)
    assert manifest.plan.cases == 7 and manifest.plan.trials == 7 * 2 * 2
    assert manifest.spec.track_options["cases"] == ["dns_changes-*", "vm_deletion-01-permitted"]


def test_the_report_of_a_filtered_run_counts_only_the_selected_cases(tmp_path: Path) -> None:
    spec = _spec(tmp_path, '[track_options]\ncases = ["dns_changes-*"]')
    run_dir = tmp_path / "run"
    assert invoke("freeze", str(spec), "--out", str(run_dir))[0] == 0
    assert invoke("run", str(run_dir), "--quiet")[0] == 0
    invoke("report", str(run_dir))
    configurations = json.loads((run_dir / "record.json").read_text())["review"]["configurations"]
    # 6 dns_changes cases x K=2: the unchecked baseline counts only those, none is "not run"
    assert configurations["unchecked"]["trials"] == 12
    assert configurations["always-permit"]["trials"] == 12
    assert configurations["always-permit"]["trials_not_run"] == 0


def test_a_pattern_matching_no_case_is_refused_at_freeze(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="matches no case"):
        build_manifest(_spec(tmp_path, '[track_options]\ncases = ["dns_change-*"]'))


def test_limit_runs_only_that_many_trials_and_a_later_run_resumes_the_rest(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    assert invoke("freeze", str(_spec(tmp_path)), "--out", str(run_dir))[0] == 0
    code, out = invoke("run", str(run_dir), "--quiet", "--limit", "10")
    assert code == 0, out
    first = read_ledger(run_dir).trials
    assert len(first) == 10
    assert {t["candidate"] for t in first} == {"reference-policy", "always-permit"}
    assert "10/240 trials finished" in out
    assert invoke("run", str(run_dir), "--quiet")[0] == 0
    assert len(read_ledger(run_dir).trials) == 240


def test_a_limit_below_one_is_bad_usage(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    invoke("freeze", str(_spec(tmp_path)), "--out", str(run_dir))
    code, out = invoke("run", str(run_dir), "--limit", "0")
    assert code == 2 and "--limit" in out
