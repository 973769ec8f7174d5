"""Attackers a corpus was not selected against (`rtb/review/_unfiltered_attackers.py`).

A tiny synthetic generator whose record count decides the label shows the pool-trained
policy-blind attacker catching it; the band is two-sided (far below chance is label information)
and gates only the policy-blind attackers (a relational learner's figure is reported, issue 51);
a policy without a generator reports the pool-trained attackers as not run, never as passed; and
on v0.3 the pool-trained relation learner recovers what outside attackers measured (55-63 %),
where the learners v0.3 was filtered against score 21-34 %.
"""

from __future__ import annotations

import random
from functools import cache
from typing import Any

import pytest

from trustbench.rtb.corpus._load import Corpus, builtin_corpus_root, load_corpus
from trustbench.rtb.policy.narrow_v3 import NARROW_V3
from trustbench.rtb.review._audit import cases_deciding
from trustbench.rtb.review._learning_audit import Scoring
from trustbench.rtb.review._unfiltered_attackers import (
    Inputs,
    UnfilteredReport,
    attack,
    attacker_specs,
    best_relabelling,
    run_unfiltered_audit,
    unfiltered_audit,
    unfiltered_verdicts,
)

DECISIONS = ("permit", "deny", "hold")
WINDOWS = {"permit": 1, "deny": 2, "hold": 3}
"""The synthetic generator's artefact: how many `window` records a case lists decides its label."""


def _draw(seed: int, count: int) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """A tiny generator: (inputs, labels, groups); no policy rule reads the window count."""
    rng = random.Random(seed)
    documents, labels, groups = [], [], []
    for index in range(count):
        label = DECISIONS[index % 3]
        evidence: list[dict[str, Any]] = [
            {"kind": "approval", "record_id": f"rec-{rng.getrandbits(48):x}", "status": "active"}
        ]
        evidence += [
            {"kind": "window", "record_id": f"rec-{rng.getrandbits(48):x}", "env": "prod"}
            for _ in range(WINDOWS[label])
        ]
        evidence += [
            {"kind": "note", "record_id": f"rec-{rng.getrandbits(48):x}", "text": "see ticket"}
            for _ in range(rng.randint(0, 2))
        ]
        rng.shuffle(evidence)
        documents.append({"evaluation_id": "x", "task": "Review the change.", "evidence": evidence})
        labels.append(label)
        groups.append(f"group-{index % 5}")
    return documents, labels, groups


def _scoring(labels: list[str], groups: list[str]) -> Scoring:
    return Scoring(
        labels=labels,
        case_ids=[f"c-{i}" for i in range(len(labels))],
        groups=groups,
        gates=NARROW_V3.review_gates,
        deciding={},
    )


def test_a_pool_trained_policy_blind_attacker_catches_a_record_count_that_decides_the_label() -> (
    None
):
    documents, labels, groups = _draw(seed=1, count=30)
    pool_documents, pool_labels, _ = _draw(seed=2, count=60)
    inputs = Inputs(documents, None, pool_documents, pool_labels)
    report = unfiltered_audit(
        inputs, _scoring(labels, groups), pool="60 cases, seed 2", margin=0.15, seed=0
    )
    pooled = {a.attacker: a for a in report.attackers if a.fitted_on.startswith("pool")}
    assert pooled["blind-forest"].accuracy == 1.0
    assert "blind-forest (pool: 60 cases, seed 2)" in report.outside_band
    assert not report.ok
    failed, line = unfiltered_verdicts(report)[0]
    assert failed is False and "blind-forest (pool: 60 cases, seed 2) 100.0%" in line


def test_cases_carrying_a_family_id_are_held_out_by_family_as_well_as_by_group() -> None:
    documents, labels, groups = _draw(seed=5, count=30)
    families = [f"family-{index // 3}" for index in range(30)]  # one case per decision each
    report = unfiltered_audit(
        Inputs(documents, families, None),
        _scoring(labels, groups),
        pool="no generator shipped",
        margin=0.15,
        seed=0,
    )
    places = [a.fitted_on for a in report.attackers if a.attacker == "blind-logistic"]
    assert places == [
        "corpus, leave one family out",
        "corpus, leave one domain group out",
        "pool",
    ]


def test_best_relabelling_counts_a_consistent_renaming_of_the_decisions_as_right() -> None:
    labels = ["permit", "deny", "hold", "permit"]
    assert best_relabelling(["deny", "hold", "permit", "deny"], labels) == 4
    assert best_relabelling(["hold", "hold", "hold", "hold"], labels) == 2


def test_an_attacker_far_below_chance_is_outside_the_two_sided_band() -> None:
    _, labels, groups = _draw(seed=3, count=30)
    swapped = {"permit": "deny", "deny": "hold", "hold": "permit"}
    spec = attacker_specs(0)[0]
    wrong = attack(spec, "corpus", [swapped[y] for y in labels], _scoring(labels, groups))
    assert (wrong.accuracy, wrong.relabelled_accuracy) == (0.0, 1.0)
    report = UnfilteredReport(
        cases=30, chance=1 / 3, margin=0.15, seed=0, pool="none", attackers=[wrong]
    )
    assert report.outside_band == ["blind-logistic (corpus)"] and not report.ok
    # Answering the least likely decision alone is far below chance too (the v0.3 finding).
    never = attack(spec, "corpus", ["deny"] * 30, _scoring(["permit"] * 15 + ["hold"] * 15, groups))
    assert never.accuracy == 0.0 and report.outside(never)


def test_a_relational_learner_outside_the_band_is_reported_and_fails_nothing() -> None:
    # Before issue 51 the band applied to relational learners too: this report failed.
    _, labels, groups = _draw(seed=6, count=30)
    relational = next(s for s in attacker_specs(0) if s.kind == "relational")
    blind = next(s for s in attacker_specs(0) if s.kind == "policy-blind")
    scoring = _scoring(labels, groups)
    scoring = Scoring(
        labels=labels,
        case_ids=scoring.case_ids,
        groups=groups,
        gates=scoring.gates,
        deciding={case_id: ("approval-active",) for case_id in scoring.case_ids},
    )
    right = attack(relational, "pool", labels, scoring)
    assert right.role == "reported" and right.failed_gates  # 30 cases: too few to pass the gates
    report = UnfilteredReport(
        cases=30, chance=1 / 3, margin=0.15, seed=0, pool="none", attackers=[right]
    )
    assert report.outside(right) and report.outside_band == [] and report.ok
    lines = unfiltered_verdicts(report)
    assert all(passed is not False for passed, _ in lines)
    assert (
        True,
        "reported: a shallow learner (relations-logistic, fitted on pool) recovers 100.0% of the "
        "policy's decisions (30 of 30); wrong on the cases these rules decide: "
        "approval-active 0/30",
    ) in lines
    # The same predictions from a policy-blind attacker are an artefact: gated, and failed.
    gated = attack(blind, "pool", labels, scoring)
    failing = UnfilteredReport(
        cases=30, chance=1 / 3, margin=0.15, seed=0, pool="none", attackers=[gated, right]
    )
    assert failing.outside_band == ["blind-logistic (pool)"] and not failing.ok


def test_without_a_generator_the_pool_trained_attackers_are_not_run_never_passed() -> None:
    documents, labels, groups = _draw(seed=4, count=30)
    inputs = Inputs(documents, None, None)
    report = unfiltered_audit(
        inputs, _scoring(labels, groups), pool="no generator shipped", margin=1.0, seed=0
    )
    pooled = [a for a in report.attackers if a.fitted_on == "pool"]
    assert pooled and all(a.correct is None for a in pooled)
    assert {a.detail for a in pooled} == {"not run (no generator shipped)"}
    assert (None, "pool-trained attackers not run (no generator shipped)") in unfiltered_verdicts(
        report
    )
    assert all(passed is not True for passed, line in unfiltered_verdicts(report) if "pool" in line)


@cache
def _v0_3() -> Corpus:
    return load_corpus(builtin_corpus_root("0.3"))


@pytest.mark.slow
def test_v0_3s_pool_trained_relation_learner_recovers_what_outside_attackers_measured() -> None:
    # About 20 s on one core: a 1,440-case pool from v0.3's generator, seed 1.
    corpus = _v0_3()
    report = run_unfiltered_audit(corpus, cases_deciding(corpus))
    figures = {(a.attacker, a.fitted_on.split(":")[0]): a for a in report.attackers}
    relation = figures[("structure-logistic", "pool")]
    assert relation.accuracy is not None and 0.55 <= relation.accuracy <= 0.65
    assert relation.rule_errors  # the rules its errors fall on
    # Outside the band, but a relational learner reads the fields the rules read: reported
    # (issue 51), so it no longer fails this audit; it passes no review gate.
    assert report.outside(relation) and relation.role == "reported"
    assert report.outside_band == [] and report.passing_gates == [] and report.ok
    assert any(
        line.startswith("reported: a shallow learner (structure-logistic, fitted on pool: 1440")
        for _, line in unfiltered_verdicts(report)
    )
    # The policy-blind attackers stay in the band: what v0.3 leaves to learn from unfiltered draws
    # is what a shallow reader of relations learns, not a planted token.
    blind = [a for a in report.attackers if a.kind == "policy-blind"]
    assert len(blind) == 4 and not any(report.outside(a) for a in blind)


@pytest.mark.slow  # loads v0.3 (shared with the test above) and grades 240 rows
def test_an_attacker_that_decides_every_v0_3_case_right_passes_the_gates_and_fails_the_audit() -> (
    None
):
    corpus = _v0_3()
    labels = [c.expectations.reference_decision.value for c in corpus.cases]
    scoring = Scoring(
        labels=labels,
        case_ids=[c.case_id for c in corpus.cases],
        groups=[c.group for c in corpus.cases],
        gates=NARROW_V3.review_gates,
        deciding={},
    )
    right = attack(attacker_specs(0)[0], "pool", labels, scoring)
    assert right.failed_gates == ()
    report = UnfilteredReport(
        cases=len(labels), chance=1 / 3, margin=1.0, seed=0, pool="", attackers=[right]
    )
    assert report.passing_gates == ["blind-logistic (pool)"] and not report.ok
