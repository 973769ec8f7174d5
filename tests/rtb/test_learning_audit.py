"""The audit that learns: learned attackers and the artifact scan on small synthetic corpora.

Each corpus is built here from random draws; a *planted* corpus adds one authoring artifact
(something a generator could plausibly leave behind), a *clean* one adds none. The checks must
find the artifact and pass the clean corpus: they can fail and they can pass.

The learned attackers read the values and relations of the fields a policy rule reads, so their
accuracy is reported, never a failing check (issue 51); what they gate is the review gates: a
learner that passes them fails the audit.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from trustbench.rtb.policy.narrow_v3 import NARROW_V3
from trustbench.rtb.review._learning_audit import (
    LearnedReport,
    LearningAudit,
    Scoring,
    artifact_scan,
    learned_audit,
    verdict_lines,
)

DECISIONS = ("permit", "deny", "hold")


def _record(rng: random.Random, kind: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "record_id": f"rec-{rng.getrandbits(24):06x}",
        "status": rng.choice(["active", "revoked", "superseded"]),
        "issued_at": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T10:00:00Z",
        "owner": rng.choice(["alice", "bob", "carol", "dave"]),
        "value": rng.randint(1, 99),
    }


def _corpus(
    seed: int, plant: str | None = None, groups: int = 6, per_group: int = 12
) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    rng = random.Random(seed)
    documents, labels, names = [], [], []
    for g in range(groups):
        for i in range(per_group):
            label = DECISIONS[i % 3]
            records = [_record(rng, "approval")]
            records += [_record(rng, rng.choice(["approval", "state", "note"])) for _ in range(3)]
            document = {
                "evaluation_id": f"rtb-{rng.getrandbits(64):016x}",
                "task": f"Review change {rng.getrandbits(16):04x} in group {g}.",
                "proposal": {"target": f"svc-{g}", "value": rng.randint(1, 99)},
                "evidence": records,
            }
            if plant == "id-suffix" and label == "deny" and rng.random() < 0.7:
                records[0]["record_id"] += "-R"  # the generator's role suffix
            if plant == "relation" and label != "hold":
                records[1]["value"] = document["proposal"]["value"]  # only holds differ
            if plant == "status":  # a field a rule reads decides the label: the policy itself
                state = {"permit": "approved", "deny": "prohibited"}.get(label, "pending")
                document["proposal"]["state"] = state
            documents.append(document)
            labels.append(label)
            names.append(f"group-{g}")
    return documents, labels, names


LENIENT_GATES = """
[analysis]
unit = "case"
intervals = ["clopper_pearson"]
confidence = 0.95

[[gates]]
name = "false-approvals"
metric = "false_approval_rate"
comparison = "<="
threshold = 0.2
bound = "upper"
interval_method = "clopper_pearson"
confidence = 0.95
"""
"""One gate a reader that never permits a deny case passes on 24 deny cases (0/24: bound 0.117)."""


def _learned(
    corpus: tuple[list[dict[str, Any]], list[str], list[str]],
    *,
    gates: Path = NARROW_V3.review_gates,
    seed: int = 0,
) -> LearnedReport:
    documents, labels, groups = corpus
    scoring = Scoring(
        labels=labels,
        case_ids=[f"case-{index}" for index in range(len(labels))],
        groups=groups,
        gates=gates,
        deciding={f"case-{index}": ("status-rule",) for index in range(len(labels))},
    )
    return learned_audit(documents, scoring, seed=seed)


def test_a_clean_corpus_passes_every_learned_attacker() -> None:
    report = _learned(_corpus(1))
    assert report.ok, [(a.attacker, a.accuracy) for a in report.attackers]
    assert report.chance == pytest.approx(1 / 3)
    assert all(a.cases == 72 for a in report.attackers)
    assert all(a.role == "reported" and a.failed_gates for a in report.attackers)


def test_a_learner_recovering_a_planted_field_relation_is_reported_not_failed() -> None:
    # Before issue 51 this corpus failed: "saturated by learned attackers" above chance + 15.
    # A relation between fields the rules read is what a shallow reader of the policy recovers:
    # its figure is reported, with the rules its errors fall on; it fails no check by accuracy.
    report = _learned(_corpus(2, plant="relation"))
    relations = next(a for a in report.attackers if a.attacker == "logistic-regression-relations")
    assert (relations.accuracy or 0) > 1 / 3 + 0.15
    assert report.ok and report.passing_gates == []
    artifacts = artifact_scan(*_corpus(2, plant="relation"))
    lines = verdict_lines(LearningAudit(report, artifacts))
    reported = [line for passed, line in lines if line.startswith("reported: ")]
    assert all(passed for passed, line in lines if line.startswith("reported: "))
    assert any(
        "(logistic-regression-relations, fitted on corpus, leave one domain group out) recovers"
        in line
        and "wrong on the cases these rules decide: status-rule" in line
        for line in reported
    ), reported


def test_a_learner_that_passes_the_review_gates_fails_the_audit_and_is_named(
    tmp_path: Path,
) -> None:
    gates = tmp_path / "gates.toml"
    gates.write_text(LENIENT_GATES)
    report = _learned(_corpus(9, plant="status"), gates=gates)
    assert "logistic-regression" in report.passing_gates and not report.ok
    passed, line = verdict_lines(LearningAudit(report, artifact_scan(*_corpus(9))))[0]
    assert passed is False
    assert line.startswith("learned attackers passing the review gates: logistic-regression (")


def test_a_planted_id_suffix_is_learned_by_some_attacker() -> None:
    # Reported here (these learners read every token); the artifact scan below and the
    # policy-blind attackers (test_unfiltered_attackers.py) are what gate an id artefact.
    report = _learned(_corpus(3, plant="id-suffix"))
    best = max(a.accuracy or 0 for a in report.attackers)
    assert best > 1 / 3 + 0.15, [(a.attacker, a.accuracy) for a in report.attackers]


def test_learned_attackers_are_reproducible_for_a_seed() -> None:
    corpus = _corpus(4, plant="relation", groups=3, per_group=6)
    assert _learned(corpus, seed=5) == _learned(corpus, seed=5)


def test_a_single_group_corpus_is_not_run_and_fails() -> None:
    report = _learned(_corpus(5, groups=1))
    assert not report.ok
    assert all(a.accuracy is None and "not run" in a.detail for a in report.attackers)


def test_artifact_scan_passes_a_clean_corpus_of_random_ids() -> None:
    report = artifact_scan(*_corpus(6))
    assert report.ok, [(c.token_class, c.mutual_information_bits) for c in report.classes[:3]]
    assert report.threshold_bits is not None and report.classes


def test_artifact_scan_names_the_planted_id_suffix_class() -> None:
    report = artifact_scan(*_corpus(7, plant="id-suffix"))
    assert not report.ok
    assert report.carrying, report.classes[:3]
    assert set(report.carrying) <= {
        "s:evidence[approval].record_id",
        "w:evidence[approval].record_id",
    }, report.carrying


def test_artifact_scan_with_one_decision_is_not_run_and_fails() -> None:
    documents, _, groups = _corpus(8)
    report = artifact_scan(documents, ["deny"] * len(documents), groups)
    assert report.threshold_bits is None and not report.ok
