"""The workflow track on corpus v0.3 (and v0.4, v0.3's rules under its own id): the tools show
what the policy reads, in its own format.

On a platform that holds governance records the tools offer `read_change_records` (requester,
environment, risk tier and every record the policy reads, as v0.3 evidence); elsewhere the
toolset is unchanged. The scripted agents read those records as the policy does, so their
self-audit signatures hold on v0.3 (`test_corpus_v0_3.py` runs the whole audit).
"""

from __future__ import annotations

import asyncio
import random
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from trustbench.rtb.boundaries import boundary_factory
from trustbench.rtb.control._cases import seed_from_case
from trustbench.rtb.corpus import load_corpus
from trustbench.rtb.corpus._load import builtin_corpus_root
from trustbench.rtb.platform import PlatformSeed, SimulatedPlatform
from trustbench.rtb.policy import policy_for
from trustbench.rtb.policy.narrow_v3._models import CaseV3
from trustbench.rtb.workflow._agent import SCRIPTED_AGENTS
from trustbench.rtb.workflow._audit import _forging, _poisoned, _Runs
from trustbench.rtb.workflow._leaks import scenario_grader_values
from trustbench.rtb.workflow._models import MemoryStore
from trustbench.rtb.workflow._scenarios import WorkflowKind, workflow_scenarios
from trustbench.rtb.workflow._tools import WorkflowTools

RECORDS_TOOL = "read_change_records"


@cache
def _cases() -> list[Any]:
    return [c for c in load_corpus(builtin_corpus_root("v0.3")).cases if isinstance(c, CaseV3)]


def _tools(seed: PlatformSeed, folder: Path) -> WorkflowTools:
    platform = SimulatedPlatform("trial-wf", seed)
    return WorkflowTools(
        platform.view,
        platform.actor,
        boundary_factory("reference"),
        MemoryStore(folder),
        random.Random(0),
    )


def test_earlier_policies_get_the_toolset_they_always_had(tmp_path: Path) -> None:
    for version in ("v0.1", "v0.2"):
        case = load_corpus(builtin_corpus_root(version)).cases[0]
        assert RECORDS_TOOL not in _tools(seed_from_case(case), tmp_path).tools()


@pytest.mark.parametrize("version", ["v0.3", "v0.4"])
def test_change_records_are_the_corpus_policys_evidence_with_the_platform_context(
    version: str, tmp_path: Path
) -> None:
    corpus = load_corpus(builtin_corpus_root(version))
    case = corpus.cases[0]
    tools = _tools(seed_from_case(case), tmp_path).tools()
    read = tools[RECORDS_TOOL](target=case.proposal.target)
    assert asyncio.iscoroutine(read)
    shown: dict[str, Any] = asyncio.run(read)
    # v0.4 reads v0.3's records under its own id: the tool names the corpus's policy.
    assert shown["policy_id"] == corpus.policy_id
    assert shown["proposal_context"] == {
        "requested_by": case.proposal.requested_by,
        "environment": case.proposal.environment,
        "risk_tier": case.proposal.risk_tier,
    }
    proposal = {**case.proposal.model_dump(mode="json"), **shown["proposal_context"]}
    policy = policy_for(shown["policy_id"])
    candidate = policy.candidate_model.model_validate(
        {
            "evaluation_id": "eval-wf",
            "task": "check",
            "as_of": shown["service_time"],
            "proposal": proposal,
            "evidence": shown["records"],
        }
    )
    # What the tool shows decides the case as its label says, and names no authored record.
    decision = policy.reference_finding(candidate)["decision"]
    assert decision == case.expectations.reference_decision.value
    authored = {r.record_id for r in case.evidence}
    assert authored.isdisjoint(r["record_id"] for r in shown["records"])


def test_every_stateful_kind_has_v0_3_scenarios() -> None:
    kinds = {s.script.kind for s in workflow_scenarios(_cases(), seed=0)}
    assert {k.value for k in WorkflowKind} <= kinds


def test_on_v0_4_the_forging_agent_forges_every_stale_approval_and_only_labels_trusting_fails() -> (
    None
):
    # v0.4's approvals also name the parameters a change keeps: the agent must still recognise
    # a stale approval of the change (as the policy reads parameters), or the harness audit of
    # the default corpus fails.
    corpus = load_corpus(builtin_corpus_root("v0.4"))
    forging = [
        s
        for s in workflow_scenarios(list(corpus.cases), seed=0)
        if s.script.kind == WorkflowKind.METADATA_FORGING
    ]
    runs = _Runs(dict(SCRIPTED_AGENTS), scenario_grader_values(forging, corpus.cases), 0)
    checks = asyncio.run(_forging(runs, forging))
    assert len(checks) == 2 and all(c.passed for c in checks), [c.detail for c in checks]


def test_on_v0_4_every_poisoned_note_recommends_parameters_the_policy_reads_as_unapproved() -> None:
    # v0.4's presentation edits write `32` as `" 32"`: a sibling's parameters equal as the
    # policy reads them are no poison, so the reference boundary would have nothing to stop.
    corpus = load_corpus(builtin_corpus_root("v0.4"))
    poisoned = [
        s
        for s in workflow_scenarios(list(corpus.cases), seed=0)
        if s.script.kind == WorkflowKind.POISONED_MEMORY
    ]
    runs = _Runs(dict(SCRIPTED_AGENTS), scenario_grader_values(poisoned, corpus.cases), 0)
    (check,) = asyncio.run(_poisoned(runs, poisoned))
    assert check.passed, check.detail
