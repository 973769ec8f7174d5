"""Operating measures of reviewer configurations (issue 49): latency, tokens, cost, escalation
volume and what an added chain member costs, each with its denominator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.rtb.test_review_track import POLICY, inprocess, run_spec, spec_text
from tests.rtb.test_review_track_llm import LLM
from tests.support.openai_server import (
    Behaviour,
    OpenAIServer,
    json_reply,
    openai_server,  # noqa: F401
    probe_reply,
)
from tests.support.records import full_record

from trustbench.core import report_run
from trustbench.rtb.corpus import CandidateInput
from trustbench.rtb.policy.narrow_v1 import ReferencePolicyReviewer

PERMIT_ALL = inprocess("always-permit", "always-permit")
HOLD_ALL = inprocess("always-hold", "always-hold")


def test_in_process_reviewers_report_escalations_with_unknown_tokens_and_cost(
    tmp_path: Path,
) -> None:
    run_dir = run_spec(tmp_path, spec_text(POLICY + HOLD_ALL))
    report_run(run_dir)
    measures = full_record(run_dir)["review"]["operating_measures"]
    assert set(measures) == {"reference-policy", "always-hold"}
    held = measures["always-hold"]
    assert held["trials"] == 12
    assert held["escalation_per_trial"]["holds"] == 12
    assert held["escalation_per_trial"]["answers"] == 12
    assert held["escalation_per_case"]["answers"] == 12
    assert held["escalation_per_trial"]["interval"][0] > 0.7
    policy = measures["reference-policy"]
    assert policy["escalation_per_trial"]["holds"] == 4  # the fixture's 4 reference-hold cases
    for each in measures.values():
        usage = each["usage"]
        assert usage["prompt_tokens"] is None and usage["completion_tokens"] is None
        assert usage["cost_usd"] is None
        assert each["added_by_chain"] is None
    page = (run_dir / "report.html").read_text()
    assert "always-hold: model calls p50/p95" in page and "tokens unknown" in page


def test_a_chain_counts_the_holds_it_adds_to_its_first_members_permits(tmp_path: Path) -> None:
    run_dir = run_spec(
        tmp_path,
        spec_text(
            PERMIT_ALL + HOLD_ALL,
            chains='{ name = "permit+hold", members = ["always-permit", "always-hold"] }',
        ),
    )
    report_run(run_dir)
    chain = full_record(run_dir)["review"]["operating_measures"]["permit+hold"]["added_by_chain"]
    assert chain["first_member"] == "always-permit" and chain["added_reviewers"] == 1
    # 4 reference-permit trials, all permitted by the first member, all held by the chain.
    assert (chain["added_holds"]["holds"], chain["added_holds"]["answers"]) == (4, 4)
    assert (chain["lost_permitted"]["holds"], chain["lost_permitted"]["answers"]) == (4, 4)
    assert chain["added_holds_per_reviewer"] == 1.0
    assert (
        "1 reviewer(s) added to always-permit: 4/4 added holds"
        in (run_dir / "report.html").read_text()
    )


def test_a_served_reviewer_reports_tokens_and_model_call_latency(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    def correct(body: Any, number: int) -> Behaviour:
        if (probe := probe_reply(body)) is not None:
            return probe
        messages = body["messages"]
        visible = CandidateInput.model_validate_json(messages[-1]["content"])
        decided = ReferencePolicyReviewer().review(messages[0]["content"], visible) or "{}"
        return json_reply(json.loads(decided), latency_s=0.01)

    openai_server.script(correct)
    run_dir = run_spec(tmp_path, spec_text(LLM.format(base_url=openai_server.base_url)))
    report_run(run_dir)
    llm = full_record(run_dir)["review"]["operating_measures"]["llm"]
    assert llm["usage"]["model_calls"] == 12 == llm["usage"]["calls_with_tokens"]
    assert llm["usage"]["prompt_tokens"] > 0 and llm["usage"]["completion_tokens"] > 0
    assert llm["model_call_latency"]["calls"] == 12
    assert llm["model_call_latency"]["p50_s"] >= 0.01
