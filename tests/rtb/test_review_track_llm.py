"""An LLM reviewer behind the local OpenAI-compatible test server: every error path counted."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from tests.rtb.test_review_track import POLICY, run_spec, spec_text
from tests.support.openai_server import (
    Behaviour,
    OpenAIServer,
    json_reply,
    malformed_json,
    openai_server,  # noqa: F401
    probe_reply,
    reply,
    server_error,
)
from tests.support.records import full_record

from trustbench.core import read_ledger, report_run
from trustbench.rtb.corpus import CandidateInput
from trustbench.rtb.policy.narrow_v1 import ReferencePolicyReviewer

KINDS = ("malformed_body", "prose", "empty", "server_error", "forged_ref", "correct")
"""What the server sends, assigned in turn to each new evaluation id it sees."""
EXPECTED_OUTCOME = {
    "malformed_body": "missing",  # HTTP 200 whose body is not JSON: no reply at all
    "prose": "invalid",  # a reply that is not a JSON object
    "empty": "missing",  # empty content
    "server_error": "missing",  # 500 on every attempt: retries exhausted
    "forged_ref": "invalid",  # a permit citing a record that is not in the input
    "correct": "decision",  # the reference policy's reply
}


class ScriptedLLM:
    """Decides the server's behaviour per evaluation id and keeps a tally of what it sent."""

    def __init__(self) -> None:
        self.kind_of: dict[str, str] = {}

    def __call__(self, body: Any, number: int) -> Behaviour | None:
        if (probe := probe_reply(body)) is not None:
            return probe
        prompt = body["messages"][0]["content"]
        visible = CandidateInput.model_validate_json(body["messages"][-1]["content"])
        eid = visible.evaluation_id
        kind = self.kind_of.setdefault(eid, KINDS[len(self.kind_of) % len(KINDS)])
        if kind == "malformed_body":
            return malformed_json()
        if kind == "prose":
            return reply("I approve this change; it looks fine to me.")
        if kind == "empty":
            return reply("")
        if kind == "server_error":
            return server_error(500)
        good = json.loads(ReferencePolicyReviewer().review(prompt, visible) or "{}")
        if kind == "forged_ref":
            return json_reply({**good, "decision": "permit", "evidence_refs": ["approval-forged"]})
        return json_reply(good)


LLM = """[[candidates]]
name = "llm"
kind = "openai_chat"
model = "test-reviewer-1"
base_url = "{base_url}"
settings = {{ temperature = 0.0 }}
"""

RETRY = """
[retry]
transport_max_retries = 2
backoff_base_s = 0.001
backoff_max_s = 0.002
"""


def test_llm_reviewer_missing_and_invalid_counts_equal_what_the_server_sent(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    script = ScriptedLLM()
    openai_server.script(script)
    text = spec_text(
        LLM.format(base_url=openai_server.base_url) + POLICY,
        chains='{ name = "llm+policy", members = ["llm", "reference-policy"] }',
    ).replace("[corpus]", RETRY + "\n[corpus]")
    run_dir = run_spec(tmp_path, text)
    report_run(run_dir)
    record = full_record(run_dir)

    sent = Counter(EXPECTED_OUTCOME[kind] for kind in script.kind_of.values())
    assert sum(sent.values()) == 12 and set(sent) == {"missing", "invalid", "decision"}
    rows = [r for r in record["review"]["trials"] if r["configuration"] == "llm"]
    got = Counter(
        r["outcome"] if r["outcome"] in ("missing", "invalid") else "decision" for r in rows
    )
    assert got == sent
    kinds = {eid: kind for eid, kind in script.kind_of.items()}
    for row in rows:
        kind = kinds[row["evaluation_ids"][0]]
        assert row["member_outcomes"][0] != "permit" or kind == "correct"
        if kind == "server_error":
            assert row["error_classes"] == ["server_error"]
        if kind == "malformed_body":
            assert row["error_classes"] == ["malformed_response"]
        if kind == "forged_ref":
            assert "approval-forged" in row["invalid_reasons"][0]
    figures = {f["name"]: f for f in record["figures"]["llm"]}
    assert figures["missing_rate"]["numerator"] == sent["missing"]
    assert figures["invalid_rate"]["numerator"] == sent["invalid"]
    # A forged permit is invalid, so it never counts as an approval.
    assert figures["false_approval_rate"]["numerator"] == 0
    # 500 on every attempt: the first attempt plus the 2 declared transport retries.
    ledger = read_ledger(run_dir)
    by_trial = Counter(a["trial_id"] for a in ledger.attempts)
    failed = [t for t in ledger.trials if t["error_class"] == "server_error"]
    assert failed and all(by_trial[t["trial_id"]] == 3 for t in failed)
    requests = Counter(
        kinds[CandidateInput.model_validate_json(r.body["messages"][-1]["content"]).evaluation_id]
        for r in openai_server.requests
        if probe_reply(r.body) is None  # the one preflight probe is no trial's request
    )
    assert len(openai_server.requests) == 1 + sum(requests.values())
    assert requests["server_error"] == 3 * sum(1 for k in kinds.values() if k == "server_error")
    configuration = record["review"]["configurations"]["llm"]
    assert configuration["members"][0]["requested_model"] == "test-reviewer-1"
    assert configuration["reported_models"] == ["test-reviewer-1"]
    assert figures["missing_rate"]["denominator"] == 12, "failed trials stay in the denominator"
