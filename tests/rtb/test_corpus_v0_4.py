"""Corpus v0.4 (policy `rtb-narrow-approval-v4`) as shipped: families, rules, labels, export.

The corpus is loaded once for the module (validation is most of a load: schema, structure,
family contract and realism checks). Each test names the issue-51 requirement it holds.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import Any

import pytest

from trustbench.rtb.corpus._export import to_candidate_input
from trustbench.rtb.corpus._leakscan import find_leaks, grader_only_values
from trustbench.rtb.corpus._load import Corpus, builtin_corpus_root, load_corpus
from trustbench.rtb.policy import DEFAULT_POLICY_ID, parse_candidate_input, policy_for, policy_of
from trustbench.rtb.policy.narrow_v3._cedar import cedar_assess_v3
from trustbench.rtb.policy.narrow_v3._reviewer import assess_v3, render_prompt_v3
from trustbench.rtb.policy.narrow_v4 import (
    FAMILY_GENERATOR,
    NARROW_V4,
    POLICY_ID_V4,
    SEED,
    policy_text_v4,
)

ROOT = builtin_corpus_root("0.4")


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return load_corpus(ROOT)


def test_v0_4_validates_under_its_own_policy_and_is_not_the_default(corpus: Corpus) -> None:
    # `load_corpus` refuses a corpus with any problem: schema, structure, leaks, the family
    # contract and every realism constraint (`check_cases_v4`).
    assert policy_for(corpus.policy_id) is NARROW_V4
    assert corpus.policy_id == POLICY_ID_V4 != DEFAULT_POLICY_ID
    assert corpus.review_prompt == render_prompt_v3(POLICY_ID_V4, policy_text_v4())


def test_v0_4_has_80_families_300_cases_20_groups_each_family_balanced(corpus: Corpus) -> None:
    cases: list[Any] = list(corpus.cases)
    families: dict[str, Counter[str]] = defaultdict(Counter)
    for case in cases:
        families[case.family][case.expectations.reference_decision.value] += 1
    assert len(families) >= 80 and len(cases) >= 300
    assert len({case.group for case in cases}) >= 20
    assert all(count == {"permit": 2, "deny": 2, "hold": 2} for count in families.values())


@pytest.mark.slow
def test_every_rule_decides_cases_in_at_least_five_families(corpus: Corpus) -> None:
    # A rule decides a case when its ablated reader (as `rtb audit` runs it) decides it otherwise
    # than the label; read here without the reply round trip, which the audit adds.
    inputs = [(case, to_candidate_input(case, "eval")) for case in corpus.cases]
    families: dict[str, set[str]] = {}
    for rule in NARROW_V4.rules:
        reader: Any = NARROW_V4.ablated_reviewer(rule.rule_id)
        families[rule.rule_id] = {
            case.family  # type: ignore[attr-defined]
            for case, visible in inputs
            if reader.read(visible).decision is not case.expectations.reference_decision
        }
    assert {rule: len(f) for rule, f in families.items() if len(f) < 5} == {}


def test_label_equals_the_reference_reviewer_on_every_case_and_cedar_on_a_sample(
    corpus: Corpus,
) -> None:
    wrong = {}
    for case in corpus.cases:
        finding = assess_v3(to_candidate_input(case, "eval"))
        codes = {code.value for code in finding.reason_codes}
        key = case.expectations
        if (finding.decision, codes) != (
            key.reference_decision,
            {code.value for code in key.acceptable_reason_codes},
        ):
            wrong[case.case_id] = finding.decision.value
    assert wrong == {}
    sample = random.Random(0).sample(list(corpus.cases), 30)
    cedar = {c.case_id: cedar_assess_v3(to_candidate_input(c, "eval")).decision for c in sample}
    assert cedar == {c.case_id: c.expectations.reference_decision for c in sample}


def test_the_export_hides_the_key_the_family_and_every_grader_only_value(corpus: Corpus) -> None:
    # What `rtb export` writes per case is `to_candidate_input` (then schema-checked and scanned).
    assert set(NARROW_V4.candidate_model.model_fields) == {
        "evaluation_id", "task", "as_of", "proposal", "evidence"
    }  # fmt: skip
    forbidden = set().union(*(grader_only_values(case) for case in corpus.cases))
    forbidden |= {case.family for case in corpus.cases}  # type: ignore[attr-defined]
    for case in corpus.cases:
        document = to_candidate_input(case, "rtb-" + "0" * 32).model_dump(mode="json")
        assert find_leaks(document, forbidden) == [], case.case_id


def test_each_case_and_its_input_find_policy_v4_and_read_back_as_v4(corpus: Corpus) -> None:
    for case in corpus.cases[:40]:
        visible = to_candidate_input(case, "rtb-" + "0" * 32)
        assert policy_of(case) is policy_of(visible) is NARROW_V4
        read_back = parse_candidate_input(visible.model_dump_json())
        assert type(read_back) is NARROW_V4.candidate_model and read_back == visible


def test_the_generator_names_the_seed_the_shipped_corpus_was_drawn_with(corpus: Corpus) -> None:
    assert FAMILY_GENERATOR.corpus_seeds == frozenset({SEED})
    assert f"seed {SEED}" in (ROOT / "README.md").read_text()
    queue = ROOT.parent / "reviews" / "v0.4" / "adjudication-queue.jsonl"
    assert queue.read_text() == ""  # no member of the shipped draw split label, reviewer, Cedar
