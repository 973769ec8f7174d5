"""A quick check: a declared case filter (frozen) and `run --limit` (the rest stays unrun)."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.cli import invoke

from trustbench.core import build_manifest, read_ledger
from trustbench.errors import InputError
from trustbench.rtb.review._options import select_cases


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


_ids = st.lists(st.text("ab-*?[]", min_size=1, max_size=4), min_size=1, max_size=6, unique=True)


@settings(max_examples=200, deadline=None)
@given(_ids, st.lists(st.text("ab-*?[]", min_size=1, max_size=4), min_size=1, max_size=4))
def test_case_selection_is_shell_pattern_matching_exact_ids_included(
    case_ids: list[str], patterns: list[str]
) -> None:
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(c, p) for c in case_ids)]
    if unmatched:
        with pytest.raises(InputError, match="matches no case"):
            select_cases(case_ids, patterns)
        return
    expected = [c for c in case_ids if any(fnmatch.fnmatchcase(c, p) for p in patterns)]
    assert select_cases(case_ids, patterns) == expected
