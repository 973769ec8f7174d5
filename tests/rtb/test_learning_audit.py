"""The audit that learns: learned attackers and the artifact scan on small synthetic corpora.

Each corpus is built here from random draws; a *planted* corpus adds one authoring artifact
(something a generator could plausibly leave behind), a *clean* one adds none. The checks must
find the artifact and pass the clean corpus: they can fail and they can pass.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from trustbench.rtb.review._learning_audit import artifact_scan, learned_audit

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
            documents.append(document)
            labels.append(label)
            names.append(f"group-{g}")
    return documents, labels, names


def test_a_clean_corpus_passes_every_learned_attacker() -> None:
    report = learned_audit(*_corpus(1))
    assert report.ok, [(a.attacker, a.accuracy) for a in report.attackers]
    assert report.chance == pytest.approx(1 / 3)
    assert all(a.cases == 72 for a in report.attackers)


def test_a_planted_field_relation_is_learned_and_saturates_the_corpus() -> None:
    report = learned_audit(*_corpus(2, plant="relation"))
    assert not report.ok
    assert "logistic-regression-relations" in report.saturating
    best = max(a.accuracy or 0 for a in report.attackers)
    assert best > (report.ceiling or 1)


def test_a_planted_id_suffix_is_learned_by_some_attacker() -> None:
    report = learned_audit(*_corpus(3, plant="id-suffix"))
    assert report.saturating, [(a.attacker, a.accuracy) for a in report.attackers]


def test_learned_attackers_are_reproducible_for_a_seed() -> None:
    corpus = _corpus(4, plant="relation", groups=3, per_group=6)
    assert learned_audit(*corpus, seed=5) == learned_audit(*corpus, seed=5)


def test_a_single_group_corpus_is_not_run_and_fails() -> None:
    report = learned_audit(*_corpus(5, groups=1))
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
