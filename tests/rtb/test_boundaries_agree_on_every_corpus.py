"""Every corpus the project ships, held-out ones included, is decided alike by all its encodings.

Issue #27's check "a held-out corpus run through reviewer, Cedar and boundaries with no
disagreement", over every built-in corpus (package data) and every corpus among the test fixtures
(the held-out mini set and the user-written v0.2-policy set): for each case, the authored reference
decision, the policy's own reviewer on the candidate-visible input, and the `reference` and
`cedar` control-path boundaries on a platform seeded from the case must all give one decision.
A policy that declares no control-path mapping (`control_path` false: the simulated platform
holds none of the state it gates on) is held to authored = reviewer, and the boundaries' refusal
of it is checked instead.
The Cedar encoding as a reviewer is held to the reviewer on the same corpora by
`test_encodings_differ.py`. Corpora are found by their manifests, so a new one is covered
without editing this file.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from trustbench.errors import InputError
from trustbench.rtb.boundaries import boundary_factory
from trustbench.rtb.control._cases import seed_from_case
from trustbench.rtb.corpus._load import builtin_corpus_root, load_corpus
from trustbench.rtb.platform import ControlRequest, SimulatedPlatform
from trustbench.rtb.policy import policy_for

BUILT_IN = sorted(builtin_corpus_root().parent.glob("*/MANIFEST.json"))
FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("*/MANIFEST.json"))
CORPORA = [m.parent for m in [*BUILT_IN, *FIXTURES]]


def _boundary_decision(name: str, case: object) -> str:
    platform = SimulatedPlatform("trial-agree", seed_from_case(case))  # type: ignore[arg-type]
    proposal = case.proposal  # type: ignore[attr-defined]
    request = ControlRequest(
        request_id="req-agree",
        operation=proposal.operation,
        target=proposal.target,
        parameters=dict(proposal.parameters),
        resource_revision=proposal.resource_revision,
    )
    answer = asyncio.run(boundary_factory(name)().authorize(request, platform.view))
    return answer.decision.value


def test_the_shipped_corpora_include_built_in_and_held_out_ones() -> None:
    assert len(BUILT_IN) >= 2
    assert any(root.name == "held_out_mini" for root in CORPORA)


def test_every_built_in_corpus_is_held_to_its_boundaries_not_only_its_reviewer() -> None:
    # A built-in corpus whose policy had no control-path mapping would skip the boundary
    # comparison below; every built-in one has a mapping (v0.3's governance state included).
    policies = {m.parent.name: policy_for(load_corpus(m.parent).policy_id) for m in BUILT_IN}
    assert [name for name, policy in policies.items() if not policy.control_path] == []


@pytest.mark.parametrize("root", CORPORA, ids=lambda root: root.name)
def test_reviewer_boundaries_and_authored_decision_agree_on_every_case(root: Path) -> None:
    corpus = load_corpus(root)
    policy = policy_for(corpus.policy_id)
    assert corpus.cases
    if not policy.control_path:
        with pytest.raises(InputError, match="no control-path mapping"):
            _boundary_decision("reference", corpus.cases[0])
    off = []
    for case in corpus.cases:
        decisions = {
            "authored": case.expectations.reference_decision.value,
            "reviewer": policy.reference_finding(policy.candidate_input(case, "eval-agree"))[
                "decision"
            ],
        }
        if policy.control_path:
            decisions["reference boundary"] = _boundary_decision("reference", case)
            decisions["cedar boundary"] = _boundary_decision("cedar", case)
        if len(set(decisions.values())) > 1:
            off.append((case.case_id, decisions))
    assert off == []
