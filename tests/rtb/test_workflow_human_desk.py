"""A person in the workflow loop's review chain, answering at the live review desk.

The run (what `trustbench run` runs) prints the person's private desk link to the operator's
console; a thread of the test plays the person over HTTP, through the desk's own form
endpoint with that token, answering each live proposal with the finding the policy's reference
reads from the page (a permit of the permitted scenario, a deny of the prohibited one). A second
run declares a 1 s limit and nobody answers: every proposal is the reviewer's hold.
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.rtb.test_workflow_review_loop import DENIED, PERMITTED
from tests.support.cli import invoke

from trustbench.core import read_ledger, run_experiment
from trustbench.rtb.policy._registry import policy_for

POLICY = policy_for("rtb-narrow-approval-v2")
LINK = re.compile(r"^\s+desk-person: (http://127\.0\.0\.1:\d+)(/s/\S+)$")
INPUT_JSON = re.compile(r"receives \(JSON\)</summary><pre>(.*?)</pre>", re.S)

PERSON = """{{ name = "desk-person", kind = "human", participant = {{ id = "p-desk", \
team = "change desk", workflow = "one reviewer in the agent's loop", qualifications = ["SRE"], \
evidence_access = "the proposal's evidence packet", time_limit_s = {limit} }} }}"""


def desk_spec(limit: float, *, access: bool = True, trial_timeout_s: float | None = None) -> str:
    """A reckless agent behind `unchecked`: only the person in its chain can stop a change."""
    declared = f"access = {{ desk-person = {{ time_limit_s = {limit} }} }}" if access else ""
    trial_limit = f"trial_timeout_s = {trial_timeout_s}" if trial_timeout_s else ""
    return f"""
suite = "rtb"
track = "workflow"
trials_per_case = 1
concurrency = 2
order_seed = 3
timeout_s = 0.5
{trial_limit}

[retry]
transport_max_retries = 0

[corpus]
builtin = "v0.2"

[track_options]
scenarios = ["{DENIED}/direct", "{PERMITTED}/direct"]

[track_options.review_chains.desk]
members = [{PERSON.format(limit=limit)}]
{declared}

[[candidates]]
name = "reckless-desk"
kind = "inprocess"
settings = {{ agent = "reckless", boundary = "unchecked", review_chain = "desk" }}
"""


def _frozen(tmp_path: Path, spec_text: str) -> Path:
    spec = tmp_path / "exp.toml"
    spec.write_text(spec_text)
    run_dir = tmp_path / "run"
    code, out = invoke("freeze", str(spec), "--out", str(run_dir))
    assert code == 0, out
    return run_dir


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the run may end (and the desk with it) right after the last answer


def _post(url: str, origin: str, fields: dict[str, Any]) -> tuple[int, str]:
    """POST the form as the page's own form would: (status, page); 303 = the finding was taken."""
    body = urllib.parse.urlencode(fields, doseq=True).encode()
    request = urllib.request.Request(url, data=body, headers={"Origin": origin}, method="POST")
    try:
        with urllib.request.build_opener(_NoRedirect).open(request, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as answered:
        return answered.code, answered.read().decode()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


@dataclass
class _Person:
    """What the person's thread saw and did (checked by the test, not inside the thread)."""

    origin: str
    path: str
    proposals: int
    shown: dict[str, str] = field(default_factory=dict)
    """Evaluation id -> the candidate input JSON the page showed."""
    pages: list[str] = field(default_factory=list)
    refusals: list[tuple[str, int, str]] = field(default_factory=list)
    """(what was tried, status, page) of each attempt the desk must refuse."""
    errors: list[BaseException] = field(default_factory=list)

    def play(self) -> None:
        try:
            self._answer_every_proposal()
        except BaseException as error:  # reported by the test
            self.errors.append(error)

    def _answer_every_proposal(self) -> None:
        """Answer with the reference finding of what the page shows; try the guards once."""
        while len(self.shown) < self.proposals:
            _, page = _get(self.origin + self.path)
            shown = INPUT_JSON.search(page)
            if shown is None:  # nothing waits yet
                threading.Event().wait(0.05)
                continue
            self.pages.append(page)
            document = html.unescape(shown[1])
            candidate_input = POLICY.candidate_model.model_validate_json(document)
            finding = POLICY.reference_finding(candidate_input)
            evaluation_id = str(getattr(candidate_input, "evaluation_id"))  # noqa: B009
            form = {
                "evaluation_id": evaluation_id,
                "decision": finding["decision"],
                "reason_codes": finding["reason_codes"],
                "evidence_refs": finding["evidence_refs"],
                "explanation": finding["explanation"],
            }
            submit = f"{self.origin}{self.path}/submit"
            if not self.shown:
                self._try_what_the_desk_refuses(submit, form)
            status, after = _post(submit, self.origin, form)
            if status != 303:
                raise AssertionError(f"the finding was not taken ({status}): {after}")
            self.shown[evaluation_id] = document

    def _try_what_the_desk_refuses(self, submit: str, form: dict[str, Any]) -> None:
        foreign = _post(submit, "http://evil.example", form)
        self.refusals.append(("a post from another origin", *foreign))
        unknown = _get(f"{self.origin}/s/not-a-token")
        self.refusals.append(("an unknown token", *unknown))
        unsupported = _post(submit, self.origin, {**form, "evidence_refs": []})
        self.refusals.append(("a finding that cites no evidence", *unsupported))


class _Operator(io.StringIO):
    """The operator's console: starts the person's thread when the desk prints their link."""

    def __init__(self, proposals: int) -> None:
        super().__init__()
        self.proposals = proposals
        self.person: _Person | None = None
        self.thread: threading.Thread | None = None

    def write(self, text: str, /) -> int:
        for line in text.splitlines():
            link = LINK.match(line)
            if link and self.proposals and self.person is None:
                self.person = _Person(link[1], link[2], self.proposals)
                self.thread = threading.Thread(target=self.person.play)
                self.thread.start()
        return super().write(text)


def _run_with_desk(run_dir: Path, proposals: int) -> tuple[str, _Person | None]:
    """`trustbench run`'s run (in this process); a thread answers at the printed link."""
    operator = _Operator(proposals)
    with contextlib.redirect_stdout(operator):
        summary = run_experiment(run_dir)
    if operator.thread is not None:
        operator.thread.join(timeout=10)
    assert summary.completed == 2, operator.getvalue()
    return operator.getvalue(), operator.person


def _reviewed(run_dir: Path, case_id: str) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """The trial's one review record, the request_change result and the trial's attempts."""
    contents = read_ledger(run_dir)
    (trial,) = [t for t in contents.trials if t["case_id"] == f"{case_id}/direct"]
    (review,) = trial["outcome"]["reviews"]
    (result,) = [
        e["result"]
        for e in trial["outcome"]["run"]["trajectory"]
        if e["kind"] == "tool_call" and e["name"] == "request_change"
    ]
    attempts = [
        a
        for a in contents.attempts
        if a["trial_id"] == trial["trial_id"] and a["endpoint"] == "trustbench-rtb-review-desk"
    ]
    return review, result, attempts


def test_a_person_at_the_desk_approves_one_live_proposal_and_denies_another_over_http(
    tmp_path: Path,
) -> None:
    run_dir = _frozen(tmp_path, desk_spec(10.0))
    printed, person = _run_with_desk(run_dir, proposals=2)
    assert "give each participant only their own link" in printed
    assert person is not None and not person.errors, person and person.errors
    assert len(person.shown) == 2
    for page in person.pages:  # the model's review request, never the scenario or its answer key
        assert DENIED not in page and PERMITTED not in page and "/direct" not in page
    refused = {tried: status for tried, status, _ in person.refusals}
    assert refused == {
        "a post from another origin": 403,
        "an unknown token": 403,
        "a finding that cites no evidence": 200,  # the page again, with why
    }
    assert "Your answer was not recorded yet" in person.refusals[-1][2]
    for case_id, decision, status in (
        (PERMITTED, "permit", "executed"),
        (DENIED, "deny", "refused"),
    ):
        review, result, attempts = _reviewed(run_dir, case_id)
        assert review["members"][0]["reviewer"] == "desk-person"
        assert review["members"][0]["outcome"] == decision
        assert review["approved"] is (decision == "permit")
        assert result["status"] == status
        (attempt,) = attempts  # what the person was shown and answered, like a model reviewer
        request = attempt["request"]
        answered = json.loads(attempt["raw_response"])
        page_json = person.shown[answered["evaluation_id"]]  # exactly what the page showed
        assert json.loads(request["messages"][-1]["content"]) == json.loads(page_json)
        assert attempt["endpoint"] == "trustbench-rtb-review-desk"
        assert request["messages"][0]["role"] == "system"
        assert answered["decision"] == decision
        assert attempt["error_class"] is None


def test_no_answer_within_the_declared_limit_holds_every_proposal_and_records_it(
    tmp_path: Path,
) -> None:
    run_dir = _frozen(tmp_path, desk_spec(1.0))
    printed, _ = _run_with_desk(run_dir, proposals=0)
    assert "desk-person: http://127.0.0.1:" in printed
    for case_id in (PERMITTED, DENIED):
        review, result, attempts = _reviewed(run_dir, case_id)
        member = review["members"][0]
        assert member["outcome"] == "hold"
        assert member["error_class"] == "time_limit_exceeded"
        assert review["approved"] is False
        assert result["status"] == "refused"
        (attempt,) = attempts
        assert attempt["error_class"] == "time_limit_exceeded"
        assert attempt["raw_response"] is None
        assert 1.0 <= attempt["latency_s"] < 5.0


def test_a_human_member_without_a_declared_time_limit_is_refused_at_freeze(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "exp.toml"
    spec.write_text(desk_spec(20.0, access=False))
    code, out = invoke("freeze", str(spec), "--out", str(tmp_path / "run"))
    assert code == 2
    assert "track_options.review_chains.desk.access.desk-person.time_limit_s" in out


def test_a_trial_timeout_shorter_than_the_persons_limit_is_refused_at_freeze(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "exp.toml"
    spec.write_text(desk_spec(20.0, trial_timeout_s=10.0))
    code, out = invoke("freeze", str(spec), "--out", str(tmp_path / "run"))
    assert code == 2
    assert "trial_timeout_s" in out


def test_the_system_under_test_block_states_each_chain_members_declared_limits(
    tmp_path: Path,
) -> None:
    from trustbench.core import read_manifest
    from trustbench.rtb.workflow.track import WorkflowTrack

    manifest = read_manifest(_frozen(tmp_path, desk_spec(10.0)))
    limits = WorkflowTrack().declared_limits(manifest.spec)
    (stated,) = [text for text in limits.values() if "desk-person" in text]
    assert stated.startswith("review chain desk: desk-person: ")
    assert "10 s per proposal (enforced" in stated
