"""Declared limits of a human reviewer: time limit, tool set and review budget, enforced.

A participant declared in `track_options.access` (like a model reviewer) has its time limit
enforced and may have a submission budget: a case not answered within the limit, or whose last
allowed submission is refused, is the reviewer's hold with its error class, never an approval.
The store runs on a fake clock (no sleeping).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.rtb.test_human_fixtures import ai_run, participant, small_corpus
from tests.support.cli import invoke
from tests.support.records import full_record

from trustbench.core import build_manifest, read_ledger, report_run, write_manifest
from trustbench.rtb.corpus._export import to_candidate_input
from trustbench.rtb.corpus._load import load_corpus
from trustbench.rtb.human._app import SessionRun
from trustbench.rtb.policy.narrow_v1 import ReferencePolicyReviewer

LIMIT_S = 300.0
P01, P02 = "sre-cab-p01", "sre-cab-p02"


class FakeClock:
    """Epoch seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _spec_text(corpus: Path, sha: str, access: str) -> str:
    return (
        f'suite = "rtb"\ntrack = "review"\ntrials_per_case = 1\norder_seed = 5\n'
        f'[corpus]\npath = "{corpus}"\n'
        f'[human_protocol]\nreference_suppliers = ["corpus-authors"]\n'
        f"[track_options.access.{P01}]\n{access}\n"
        + participant("P01", sha, False, LIMIT_S)
        + participant("P02", sha, False, LIMIT_S)
    )


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """The small corpus and its finished AI run, shared: (folder, corpus, manifest sha256)."""
    base = tmp_path_factory.mktemp("limits")
    corpus = small_corpus(base / "corpus")
    _, sha = ai_run(base, corpus)
    return base, corpus, sha


@pytest.fixture
def limited(source: tuple[Path, Path, str], tmp_path: Path) -> tuple[Path, Path]:
    """A frozen human run: P01 declares an enforced limit and a budget of 2; P02 declares none."""
    base, corpus, sha = source
    spec = base / f"human-{tmp_path.name}.toml"  # beside the AI run its participants name
    spec.write_text(_spec_text(corpus, sha, f"time_limit_s = {LIMIT_S}\nmax_submissions = 2"))
    run_dir = tmp_path / "human-run"
    write_manifest(build_manifest(spec), run_dir)
    return run_dir, corpus


def _finding(corpus: Path, case_id: str, evaluation_id: str) -> dict[str, Any]:
    import json

    case = load_corpus(corpus).case(case_id)
    shown = to_candidate_input(case, evaluation_id)
    return json.loads(ReferencePolicyReviewer().review("", shown))


def test_a_participant_past_the_enforced_time_limit_is_the_reviewers_hold(
    limited: tuple[Path, Path],
) -> None:
    run_dir, corpus = limited
    clock = FakeClock()
    with SessionRun(run_dir=run_dir, clock=clock) as served:
        store = served.store
        assert store is not None
        opened = store.open_case(P01)
        assert opened is not None
        case_clock, _ = opened
        clock.now += LIMIT_S + 1  # the participant answers too late
        late = store.submit(P01, _finding(corpus, case_clock.case_id, case_clock.evaluation_id))
        assert not late.recorded and "time limit" in (late.reason or "")
        # P02's limit is advisory: the same lateness keeps the finding, recorded as an overrun.
        opened = store.open_case(P02)
        assert opened is not None
        p02_clock, _ = opened
        clock.now += LIMIT_S + 1
        kept = store.submit(P02, _finding(corpus, p02_clock.case_id, p02_clock.evaluation_id))
        assert kept.recorded
    trials = {t["candidate"]: t for t in read_ledger(run_dir).trials}
    held = trials[P01]
    assert held["error_class"] == "time_limit_exceeded"
    assert held["outcome"]["reply"] is None
    assert held["outcome"]["review_budget_exhausted"].startswith("time_limit")
    assert trials[P02]["error_class"] is None
    assert trials[P02]["outcome"]["overran_time_limit"] is True
    # Graded as the reviewer's hold: never a finding the participant did not make in time.
    report_run(run_dir)
    graded = [t for t in full_record(run_dir)["review"]["trials"] if t["configuration"] == P01]
    assert [t["outcome"] for t in graded if t["outcome"] != "not_run"] == ["hold"]


def test_an_open_case_past_its_limit_is_held_when_the_page_is_next_asked_for(
    limited: tuple[Path, Path],
) -> None:
    run_dir, _ = limited
    clock = FakeClock()
    with SessionRun(run_dir=run_dir, clock=clock) as served:
        store = served.store
        assert store is not None
        first = store.open_case(P01)
        assert first is not None
        clock.now += LIMIT_S + 0.5  # the participant walked away
        second = store.open_case(P01)
        assert second is not None and second[0].case_id != first[0].case_id
        opened_again = store.open_case(P01)
        assert opened_again is not None
        clock.now += 10.0
        store.pause(P01)  # within its limit: paused, not held
    (trial,) = read_ledger(run_dir).trials
    assert trial["case_id"] == first[0].case_id
    assert trial["error_class"] == "time_limit_exceeded"


def test_a_participant_who_spends_the_submission_budget_is_the_reviewers_hold(
    limited: tuple[Path, Path],
) -> None:
    run_dir, corpus = limited
    clock = FakeClock()
    with SessionRun(run_dir=run_dir, clock=clock) as served:
        store = served.store
        assert store is not None
        opened = store.open_case(P01)
        assert opened is not None
        case_clock, _ = opened
        broken = {
            **_finding(corpus, case_clock.case_id, case_clock.evaluation_id),
            "explanation": "",
        }
        assert not store.submit(P01, broken).recorded  # the first refusal: shown again
        assert read_ledger(run_dir).trials == []
        spent = store.submit(P01, broken)
        assert not spent.recorded and "budget" in (spent.reason or "")
    (trial,) = read_ledger(run_dir).trials
    assert trial["error_class"] == "review_budget_exhausted"
    assert trial["outcome"]["rejected_submissions"] == 2
    assert trial["outcome"]["reply"] is None


def test_the_system_under_test_block_prints_each_reviewers_declared_limits(
    limited: tuple[Path, Path],
) -> None:
    run_dir, _ = limited
    with SessionRun(run_dir=run_dir):  # served once, nobody reviewed yet
        pass
    report_run(run_dir)
    rows = {row["name"]: row for row in full_record(run_dir)["system_under_test"]["configurations"]}
    assert "300 s per case (enforced" in rows[P01]["declared_limits"]
    assert "review budget 2 submission(s) per case" in rows[P01]["declared_limits"]
    assert "tools: none beyond the review page" in rows[P01]["declared_limits"]
    assert "(advisory, not enforced)" in rows[P02]["declared_limits"]
    page = (run_dir / "report.html").read_text()
    assert "review budget 2 submission(s) per case" in page


@pytest.mark.parametrize(
    ("access", "field"),
    [
        ("time_limit_s = 60.0", "time_limit_s"),  # not the participant's declared 300 s
        ('information = "tools"', "information"),  # a person works no tool loop
    ],
)
def test_a_human_limit_that_cannot_be_honoured_is_refused_at_freeze(
    source: tuple[Path, Path, str], tmp_path: Path, access: str, field: str
) -> None:
    _, corpus, _ = source
    spec = tmp_path / "human.toml"
    declared = f"{access}\ntime_limit_s = {LIMIT_S}" if field == "information" else access
    text = _spec_text(corpus, "0" * 64, declared)
    # No recommendation source: the refusal must come from the declared limits alone.
    spec.write_text("\n".join(x for x in text.splitlines() if not x.startswith("recommendation")))
    code, out = invoke("freeze", str(spec), "--out", str(tmp_path / "run"))
    assert code == 2, out
    assert f"track_options/access/{P01}/{field}" in out and "Traceback" not in out


def test_a_submission_budget_for_a_model_reviewer_is_refused_at_freeze(tmp_path: Path) -> None:
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'suite = "rtb"\ntrack = "review"\n[corpus]\nbuiltin = "v0.1"\n'
        "[track_options.access.ref]\nmax_submissions = 2\n"
        '[[candidates]]\nname = "ref"\nkind = "inprocess"\n'
        'entry = "trustbench.rtb.review.reviewers:chat_responder"\n'
        'settings = { reviewer = "reference-policy" }\n'
    )
    code, out = invoke("freeze", str(spec), "--out", str(tmp_path / "run"))
    assert code == 2, out
    assert "track_options/access/ref/max_submissions" in out and "Traceback" not in out
