"""The "System under test" block: what was tested, at the top of the report and in the record.

A served model may not be the one requested (a hosted alias resolving to a dated revision); the
spec asks the report to keep both ids, and the declared lineage, administrative boundary and
revision, "not declared" when the spec leaves them out.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from tests.rtb.test_review_track import POLICY, run_spec, spec_text
from tests.support.openai_server import OpenAIServer, probe_reply, reply
from tests.support.openai_server import openai_server as openai_server  # fixture

from trustbench.core import BUILTIN_TRACKS, SubjectDescription, load_track, report_run
from trustbench.rtb.corpus import CandidateInput
from trustbench.rtb.policy.narrow_v1 import ReferencePolicyReviewer

REQUESTED = "fake-model"
REPORTED = "fake-model-2025-01-01-REPORTED"
OTHER = "fake-model-2025-02-02-OTHER"

LLM = f"""[[candidates]]
name = "llm"
kind = "openai_chat"
model = "{REQUESTED}"
base_url = "{{base_url}}"
settings = {{{{ temperature = 0.0, max_tokens = 300 }}}}
administrative_boundary = "vendor-hosted API, shared tenant"
immutable_revision = false
"""


def _served_as_another_model(body: Any, number: int) -> Any:
    """The reference policy's answer, named by the server as a dated model (every 5th: another)."""
    if (probe := probe_reply(body)) is not None:
        return probe
    prompt = body["messages"][0]["content"]
    visible = CandidateInput.model_validate_json(body["messages"][-1]["content"])
    answer = ReferencePolicyReviewer().review(prompt, visible) or "{}"
    return reply(answer, model=OTHER if number % 5 == 0 else REPORTED)


@pytest.fixture(scope="module")
def reported_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    """A reviewer run: `llm` served under other ids, and the in-process reference policy."""
    tmp_path = tmp_path_factory.mktemp("sut")
    with OpenAIServer() as server:
        server.script(_served_as_another_model)
        text = spec_text(
            LLM.format(base_url=server.base_url) + POLICY,
            chains='{ name = "llm+policy", members = ["llm", "reference-policy"] }',
        )
        run_dir = run_spec(tmp_path, text)
        report_run(run_dir)
    record = json.loads((run_dir / "record.json").read_text(encoding="utf-8"))
    return record, (run_dir / "report.html").read_text(encoding="utf-8")


def _block(html: str) -> str:
    found = re.search(r'<section id="system-under-test".*?</section>', html, re.S)
    assert found, "no System under test block"
    return found.group(0)


def _row(html: str, name: str) -> str:
    rows = re.findall(r"<tr[^>]*>\s*<td class=\"name\">(.*?)</tr>", _block(html), re.S)
    found = [row for row in rows if row.startswith(f"{name}<br>")]
    assert len(found) == 1, rows
    return found[0]


def test_a_server_reporting_another_model_id_shows_both_ids_and_flags_the_verdict(
    reported_run: tuple[dict[str, Any], str],
) -> None:
    record, html = reported_run
    row = _row(html, "llm")
    assert f"requested {REQUESTED}" in row and REPORTED in row and OTHER in row
    assert "MODEL ID MISMATCH" in row
    verdict = re.search(r'<td class="name">llm</td>\s*<td class="verdict-text">([^<]*)', html)
    assert verdict and verdict.group(1).startswith("MODEL ID MISMATCH: requested fake-model")
    assert REPORTED in verdict.group(1)
    # The block sits above the gates and the detail sections: on the first screen.
    assert html.index('id="system-under-test"') < html.index('id="gates"')
    assert record["verdicts"]["llm"]["headline"].startswith("MODEL ID MISMATCH")
    assert "MISMATCH" not in record["verdicts"]["reference-policy"]["headline"]


def test_the_record_carries_every_reported_id_with_its_attempts(
    reported_run: tuple[dict[str, Any], str],
) -> None:
    record, _ = reported_run
    rows = {row["name"]: row for row in record["system_under_test"]["configurations"]}
    llm = rows["llm"]
    assert llm["requested_model"] == REQUESTED and llm["model_id_mismatch"] is True
    assert set(llm["reported_models"]) == {REPORTED, OTHER}
    assert sum(llm["reported_models"].values()) == 12  # one attempt per case, none lost
    assert llm["serving_settings"] == {"temperature": 0.0, "max_tokens": 300}
    assert llm["subject_type"] == "endpoint" and llm["information_condition"] == "packet"
    assert rows["llm+policy"]["subject_type"] == "review chain"
    assert record["system_under_test"]["prompt_sha256"]["prompts/review_prompt.md"]


def test_undeclared_lineage_reads_not_declared_and_declarations_show_as_declared(
    reported_run: tuple[dict[str, Any], str],
) -> None:
    record, html = reported_run
    cells = re.findall(r"<td>(.*?)</td>", _row(html, "llm"), re.S)
    lineage, boundary, revision = cells[-3:]
    assert lineage == "not declared"
    assert boundary == "vendor-hosted API, shared tenant"
    assert revision.startswith("no (declared)")
    llm = next(r for r in record["system_under_test"]["configurations"] if r["name"] == "llm")
    assert llm["lineage"] is None and llm["immutable_revision"] is False


def test_an_in_process_candidate_is_shown_as_not_a_model(
    reported_run: tuple[dict[str, Any], str],
) -> None:
    record, html = reported_run
    row = _row(html, "reference-policy")
    assert "not a model (in-process code)" in row and "requested" not in row
    policy = next(
        r for r in record["system_under_test"]["configurations"] if r["name"] == "reference-policy"
    )
    assert policy["is_model"] is False and policy["requested_model"] is None
    assert policy["reported_models"] == {} and policy["model_id_mismatch"] is False


@pytest.mark.parametrize(
    ("track_id", "subject_type", "condition"),
    [
        ("rtb/review", "endpoint", "packet"),
        ("rtb/control", "execution architecture", "request presented directly by the harness"),
        ("rtb/workflow", "agent application", "tools"),
        ("trb/profile", "endpoint", "trace"),
    ],
)
def test_every_built_in_track_says_what_its_configurations_are(
    track_id: str, subject_type: str, condition: str
) -> None:
    assert set(BUILTIN_TRACKS) == {"rtb/review", "rtb/control", "rtb/workflow", "trb/profile"}
    track, _ = load_track(track_id)
    subject = getattr(track, "subject_description", None)
    assert isinstance(subject, SubjectDescription)
    assert (subject.subject_type, subject.information_condition) == (subject_type, condition)
    assert bool(subject.tools) == (condition == "tools")
