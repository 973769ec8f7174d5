"""The corpus-policy extension point: one registered object per policy id, asked by everything."""

from __future__ import annotations

import re

import pytest
from tests.support.import_graph import PACKAGE_ROOT

from trustbench.errors import AlreadyRegistered, InputError
from trustbench.rtb.corpus import builtin_corpus_root, load_corpus
from trustbench.rtb.corpus._export import to_candidate_input
from trustbench.rtb.policy import (
    DEFAULT_POLICY_ID,
    CorpusPolicy,
    known_policy_ids,
    parse_candidate_input,
    policy_for,
    policy_of,
    register_policy,
    registered_policies,
)
from trustbench.rtb.policy.narrow_v1 import NARROW_V1, NarrowApprovalV1
from trustbench.rtb.policy.narrow_v2 import NARROW_V2
from trustbench.rtb.policy.narrow_v3 import NARROW_V3
from trustbench.rtb.policy.narrow_v4 import NARROW_V4

VERSION_STRING = re.compile(r"v0\.\d|rtb-narrow-approval|_v\d\b|V\d\b|narrow_v\d")
"""A corpus version, a policy id or a version-suffixed name."""


def test_every_built_in_policy_satisfies_the_protocol_and_is_registered_once() -> None:
    assert known_policy_ids() == (
        NARROW_V1.policy_id,
        NARROW_V2.policy_id,
        NARROW_V3.policy_id,
        NARROW_V4.policy_id,
    )
    assert all(isinstance(policy, CorpusPolicy) for policy in registered_policies())
    assert policy_for(None) is policy_for(DEFAULT_POLICY_ID) is NARROW_V1


def test_a_second_object_for_a_registered_id_or_its_models_is_refused() -> None:
    with pytest.raises(AlreadyRegistered, match="built in and cannot be replaced"):
        register_policy(NarrowApprovalV1())

    class Copycat(NarrowApprovalV1):
        policy_id = "copycat"

    with pytest.raises(ValueError, match="reuses the models"):
        register_policy(Copycat())
    assert "copycat" not in known_policy_ids()


def test_an_unknown_policy_id_or_value_is_an_input_error_naming_the_known_ones() -> None:
    with pytest.raises(InputError, match=NARROW_V2.policy_id):
        policy_for("rtb-made-up")
    with pytest.raises(InputError, match="belongs to no registered corpus policy"):
        policy_of(object())


@pytest.mark.parametrize("version", ["0.1", "0.2", "0.3"])
def test_each_case_and_its_input_find_the_policy_the_corpus_declares(version: str) -> None:
    corpus = load_corpus(builtin_corpus_root(version))
    policy = policy_for(corpus.policy_id)
    for case in corpus.cases:
        candidate = to_candidate_input(case, "rtb-" + "0" * 32)
        assert policy_of(case) is policy_of(candidate) is policy
        read_back = parse_candidate_input(candidate.model_dump_json())
        assert type(read_back) is policy.candidate_model and read_back == candidate


def test_no_corpus_version_string_outside_the_policy_objects() -> None:
    # The acceptance check of the layout: code outside `rtb/policy/` asks the corpus's policy
    # object instead of naming a version (corpus data folders are JSON/Markdown, not scanned).
    policy_root = PACKAGE_ROOT / "rtb" / "policy"
    offenders = [
        f"{path.relative_to(PACKAGE_ROOT)}:{number}: {line.strip()}"
        for path in sorted((PACKAGE_ROOT / "rtb").rglob("*.py"))
        if policy_root not in path.parents
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if VERSION_STRING.search(line)
    ]
    assert offenders == []


def test_the_version_scan_catches_a_branch_on_a_policy_id() -> None:
    # The cheat the scan exists for, written without looking at the code it guards.
    branch = [
        'if corpus.policy_id == "rtb-narrow-approval-v2":',
        "    seed = seed_from_case_v2(case)",
        "elif isinstance(case, CaseV3):",
        '    root = builtin_corpus_root("v0.3")',
    ]
    assert all(VERSION_STRING.search(line) for line in branch)
