"""Graded member trials kept in a temporary file read back equal, and none is lost."""

from __future__ import annotations

from dataclasses import replace

from trustbench.rtb.corpus._load import load_corpus
from trustbench.rtb.review._grading import MemberStore, MemberTrial
from trustbench.rtb.review._validation import Outcome, ValidatedResponse


def _member(case, candidate: str, k: int, **changes) -> MemberTrial:
    trial = MemberTrial(
        case=case, candidate=candidate, trial=k, status="completed", evaluation_id="e" * 32,
        raw_reply=None, reported_model="m", validated=ValidatedResponse(outcome=Outcome.DENY),
        supported=True, latency_s=0.1 + k / 3, tokens=1234, cost_usd=None, attempts=1,
        error_class=None, explanation="because ünïcode", support_gaps=("gap",),
    )  # fmt: skip
    return replace(trial, **changes)


def test_member_store_reads_back_equal_trials_and_keeps_those_outside_the_plan() -> None:
    corpus = load_corpus()
    first, second = corpus.cases[0], corpus.cases[1]
    store = MemberStore(corpus, ["a", "b"], 2)
    stored = [
        _member(first, "a", 0),
        _member(
            second,
            "b",
            1,
            status="failed",
            validated=ValidatedResponse(outcome=Outcome.MISSING),
            supported=False,
            latency_s=None,
            tokens=None,
            error_class="timeout",
        ),
        _member(
            first,
            "b",
            1,
            validated=ValidatedResponse(outcome=Outcome.INVALID, invalid_reason="bad"),
            raw_reply="{",
            cost_usd=0.25,
        ),
        _member(first, "zed", 0),  # a candidate outside the plan: kept as it is
        _member(first, "a", 5),  # a trial index outside the plan
    ]
    for trial in stored:
        store.put(trial)
    store.put(_member(first, "a", 0, tokens=99))  # a later row for the same key replaces it
    assert len(store) == 5
    assert store[(first.case_id, "a", 0)].tokens == 99
    for trial in stored[1:]:
        key = (trial.case.case_id, trial.candidate, trial.trial)
        assert key in store
        assert store[key] == trial
    assert (second.case_id, "a", 0) not in store
    assert store.get((second.case_id, "a", 0)) is None
    assert sorted(store) == sorted((t.case.case_id, t.candidate, t.trial) for t in stored)
    store.close()


def test_joint_decisions_of_two_configurations_equal_their_rows_merged() -> None:
    """The comparison's fast path (kept outcomes) pairs the same trials as indexing the rows."""
    from trustbench.rtb.review._chain import (
        ConfigurationKind,
        MemberIdentity,
        ReviewConfiguration,
    )
    from trustbench.rtb.review._grading import configuration_rows

    corpus = load_corpus()
    store = MemberStore(corpus, ["a", "b"], 3)
    outcomes = [Outcome.PERMIT, Outcome.DENY, Outcome.HOLD, Outcome.INVALID, Outcome.MISSING]
    for position, case in enumerate(corpus.cases[:6]):
        for k in range(3):
            if (position, k) != (2, 1):  # a's trial never finished
                store.put(_member(case, "a", k, validated=ValidatedResponse(outcome=outcomes[k])))
            if (position, k) != (4, 0):  # nor this one of b's
                outcome = outcomes[(position + k) % 5]
                store.put(_member(case, "b", k, validated=ValidatedResponse(outcome=outcome)))
    sides = []
    for name in ("a", "b"):
        single = ReviewConfiguration(
            name=name, kind=ConfigurationKind.SINGLE, members=(MemberIdentity(reviewer=name),)
        )
        rows, _ = configuration_rows(single, [name], corpus, 3, store)
        assert len(list(rows)) > 0  # the counting pass: it keeps each trial's outcome
        sides.append(rows)
    by_key = {(r.case_id, r.trial): r for r in sides[1].decisions()}
    indexed = [
        (a.case_id, a.group, a.reference, a.observed, by_key[(a.case_id, a.trial)].observed)
        for a in sides[0].decisions()
        if (a.case_id, a.trial) in by_key
    ]
    assert list(sides[0].joint_decisions(sides[1])) == indexed
    assert len(indexed) == 6 * 3 - 2
