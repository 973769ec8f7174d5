"""Reasoning replies from a local OpenAI-compatible server, graded as meant (issue 55).

The fake server answers each review with the reference policy's finding in `content`, and by
turns either a `reasoning_content` draft that permits (recorded, never graded) or the same
finding cut by the token limit (`finish_reason` `length`: invalid, counted and shown).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.rtb.test_review_track import run_spec, spec_text
from tests.support.openai_server import (
    Behaviour,
    OpenAIServer,
    openai_server,  # noqa: F401
    probe_reply,
    raw_body,
)
from tests.support.records import full_record

from trustbench.core import read_ledger, report_run
from trustbench.rtb.corpus import CandidateInput
from trustbench.rtb.policy.narrow_v1 import ReferencePolicyReviewer

LLM = """[[candidates]]
name = "thinker"
kind = "openai_chat"
model = "thinker-1"
base_url = "{base_url}"
settings = {{ temperature = 0.0, max_tokens = 64 }}
"""


class ReasoningModel:
    """Alternates, per evaluation id, a reply with a permit draft in `reasoning_content` and a
    reply cut by max_tokens; remembers which id got which."""

    def __init__(self) -> None:
        self.kind_of: dict[str, str] = {}

    def __call__(self, body: Any, number: int) -> Behaviour | None:
        if (probe := probe_reply(body)) is not None:
            return probe
        prompt = body["messages"][0]["content"]
        visible = CandidateInput.model_validate_json(body["messages"][-1]["content"])
        kind = self.kind_of.setdefault(
            visible.evaluation_id, ("reasoning", "cut")[len(self.kind_of) % 2]
        )
        final = ReferencePolicyReviewer().review(prompt, visible) or "{}"
        draft = json.dumps({**json.loads(final), "decision": "permit"})
        message: dict[str, Any] = {"role": "assistant", "content": final}
        if kind == "reasoning":
            message["reasoning_content"] = f"Draft: {draft}"
        choice = {
            "index": 0,
            "message": message,
            "finish_reason": "length" if kind == "cut" else "stop",
        }
        return raw_body(json.dumps({"id": "x", "model": "thinker-1", "choices": [choice]}))


def test_finish_reason_length_reaches_the_trial_rows_record_and_report_and_reasoning_is_not_graded(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    model = ReasoningModel()
    openai_server.script(model)
    text = spec_text(LLM.format(base_url=openai_server.base_url)).replace(
        "[track_options]", '[track_options]\nanswer_extraction = "final_json_object"'
    )
    run_dir = run_spec(tmp_path, text)
    report_run(run_dir)
    record = full_record(run_dir)

    rows = [r for r in record["review"]["trials"] if r["configuration"] == "thinker"]
    assert len(rows) == 12
    for row in rows:
        kind = model.kind_of[row["evaluation_ids"][0]]
        if kind == "cut":
            assert row["outcome"] == "invalid" and row["finish_reasons"] == ["length"]
            assert row["invalid_reasons"] == ["cut by max_tokens (finish_reason length)"]
        else:  # the permit draft in reasoning_content is never the answer
            assert row["outcome"] == row["reference"] and row["finish_reasons"] == ["stop"]
    cut = record["review"]["configurations"]["thinker"]["cut_by_max_tokens"]
    assert cut == {"trials": 6, "of": 12, "label": "cut by max_tokens: 6 of 12"}
    assert (
        "thinker: no failed trial; cut by max_tokens: 6 of 12"
        in (run_dir / "report.html").read_text()
    )
    drafts = [
        t["outcome"]["reasoning"]
        for t in read_ledger(run_dir).trials
        if model.kind_of[t["outcome"]["evaluation_id"]] == "reasoning"
    ]
    assert len(drafts) == 6 and all('"decision": "permit"' in d for d in drafts)
