"""The v0.3 generator, run small: seeded output is byte-identical and passes the corpus checks.

The shipped corpus takes the generator minutes (a pool of every group and twist, then the
adversarial filter); this runs its whole path on two domain groups without the filter, which is
the part that writes, balances and covers rules. The filter's learners are the audit's own and
are tested with it.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.rtb.test_corpus_v0_3 import _author_module

from trustbench.rtb.corpus._load import load_corpus, validate_corpus
from trustbench.rtb.policy.narrow_v3 import NARROW_V3
from trustbench.rtb.policy.narrow_v3._models import CandidateInputV3
from trustbench.rtb.review._audit import cases_deciding

SMALL = ["--groups", "2", "--no-filter", "--least-decided", "1"]
"""Two domain groups, no adversarial filter, every declared rule deciding at least one case.

(24 cases leave no room for every scenario kind under two decisions as well; the shipped corpus
is held to that in `test_corpus_v0_3.py`.)"""


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _generate(author: Any, out: Path) -> dict[str, bytes]:
    assert author.main(["--out", str(out), *SMALL]) == 0
    return _files(out)


def test_the_small_generator_run_is_deterministic_and_passes_the_corpus_checks(
    tmp_path: Path,
) -> None:
    author = _author_module()
    first = _generate(author, tmp_path / "a")
    assert first == _generate(author, tmp_path / "b")
    # No draw of these groups splits label, reviewer and Cedar: the queue beside them is empty.
    assert (tmp_path / "reviews" / "v0.3" / "adjudication-queue.jsonl").read_bytes() == b""
    assert validate_corpus(tmp_path / "a").problems == []
    corpus = load_corpus(tmp_path / "a")
    decisions = Counter(c.expectations.reference_decision.value for c in corpus.cases)
    assert decisions == {"permit": 8, "deny": 8, "hold": 8}
    assert len({c.group for c in corpus.cases}) == 2
    # The rule quota: every declared rule decides at least one case (its ablated reader turns it).
    deciding = Counter(rule for rules in cases_deciding(corpus).values() for rule in rules)
    assert {rule.rule_id for rule in NARROW_V3.rules} <= set(deciding)


def test_a_draw_the_label_reviewer_and_cedar_disagree_on_is_queued_not_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    author = _author_module()
    fz_on = author.KINDS["change_freeze"][0]

    def fz_on_labelled_permit(world: Any) -> None:
        """A freeze in effect, authored as a permit: both implementations deny it."""
        fz_on(world)

    monkeypatch.setattr(author, "KINDS", {"change_freeze": (fz_on, fz_on_labelled_permit)})
    pool, queue = author.draw_pool(1, seed=7, groups=1)
    assert [c.expectations.reference_decision.value for c in pool] == ["deny"]
    # A permit twist is drawn twice (`DRAWS`): both draws are kept, in the queue.
    assert [entry["draw"] for entry in queue] == [
        "7/0/fz_on_labelled_permit/0",
        "7/0/fz_on_labelled_permit/1",
    ]
    path = tmp_path / "reviews" / "v0.3" / "adjudication-queue.jsonl"
    author.write_queue(path, queue)
    first = json.loads(path.read_text().splitlines()[0])
    assert {name: d["decision"] for name, d in first["decisions"].items()} == {
        "authored": "permit",
        "reference_reviewer": "deny",
        "cedar": "deny",
    }
    assert first["decisions"]["reference_reviewer"]["reason_codes"] == ["change_freeze_in_effect"]
    assert (first["seed"], first["index"], first["twist"]) == (7, 0, "fz_on_labelled_permit")
    # What a reviewer is shown: the candidate-visible input, which reads back as one.
    assert CandidateInputV3.model_validate(first["candidate_input"]).evaluation_id == "authoring"


def test_queued_draws_written_as_a_corpus_can_be_frozen_into_a_review_protocol(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trustbench.rtb.adjudication import freeze_protocol, import_reviews, read_record

    author = _author_module()
    fz_on = author.KINDS["change_freeze"][0]

    def fz_on_labelled_permit(world: Any) -> None:
        fz_on(world)

    monkeypatch.setattr(author, "KINDS", {"change_freeze": (fz_on_labelled_permit,)})
    _, queue = author.draw_pool(1, seed=7, groups=1)
    queued = tmp_path / "queue-corpus"
    author.write_queue_corpus(queued, queue)
    record = tmp_path / "record.jsonl"
    protocol = freeze_protocol(record, str(queued), selection="all", options={})
    assert protocol.cases == sorted(entry["case"]["case_id"] for entry in queue)
    review = tmp_path / "review.tsv"
    rows = [f"{case_id}\tdeny" for case_id in protocol.cases]
    review.write_text("# reviewer_id: rev-a\n# role: tester\ncase_id\tdecision\n" + "\n".join(rows))
    assert import_reviews(record, review, declared={})[1] == 2
    assert [r.review.decision for r in read_record(record).reviews()] == ["deny", "deny"]


def test_the_shipped_queue_holds_as_many_draws_as_the_reviews_readme_states() -> None:
    import re

    from trustbench.rtb.corpus._load import builtin_corpus_root

    reviews = builtin_corpus_root("0.3").parent / "reviews" / "v0.3"
    stated = re.search(
        r"Queued with the shipped seeds: (\d+) of", (reviews / "README.md").read_text()
    )
    assert stated is not None
    queued = (reviews / "adjudication-queue.jsonl").read_text().splitlines()
    assert len(queued) == int(stated[1])


def test_v0_3_generator_draws_the_same_unfiltered_pool_per_seed_and_refuses_the_corpus_seed() -> (
    None
):
    from trustbench.rtb.policy import CaseGenerator
    from trustbench.rtb.policy.narrow_v3._generator import SEED

    generator = NARROW_V3.generator
    assert isinstance(generator, CaseGenerator)
    assert generator.corpus_seeds == frozenset({SEED})
    first = generator.draw_pool(1, 40)
    assert first == generator.draw_pool(1, 40)
    assert first != generator.draw_pool(2, 40)
    assert len(first) == 40 and len({c.group for c in first}) > 5  # type: ignore[attr-defined]
    # Unfiltered: the pool keeps the generator's own decision mix (twists drawn per `DRAWS`).
    assert len({c.expectations.reference_decision for c in first}) == 3  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="drew the shipped corpus"):
        generator.draw_pool(SEED, 1)
