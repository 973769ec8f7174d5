"""Inspect round trip: the RTB reviewer task under `inspect_ai.eval`, imported and graded by us.

The task runs in-process against the local fake OpenAI-compatible server, scripted per
evaluation id; the log is imported with `import-inspect` and graded by `trustbench report`. The
trustbench decisions must equal what the server was scripted to answer, cases the Inspect run did
not sample must be "not run" (never zero), and a log whose inputs differ from the export is
refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.rtb.test_review_track import small_corpus
from tests.support.cli import invoke
from tests.support.openai_server import (
    Behaviour,
    OpenAIServer,
    json_reply,
    reply,
)
from tests.support.records import full_record

from trustbench.core import report_run
from trustbench.rtb.corpus import CandidateInput, export_candidate_inputs, load_corpus
from trustbench.rtb.policy.narrow_v1 import ReferencePolicyReviewer

inspect_ai = pytest.importorskip("inspect_ai", reason="needs the `inspect` extra")
pytest.importorskip("openai", reason="Inspect's openai/ provider needs the openai package")

KINDS = ("correct", "prose", "empty", "forged_ref", "permit")
"""What the server answers, assigned in turn to each new evaluation id it sees."""
SAMPLED = 5
"""Cases the Inspect run samples (`limit`); the rest of the 12-case corpus is not run."""


class ScriptedReviewer:
    """Decides the server's reply per evaluation id and records the outcome it implies."""

    def __init__(self) -> None:
        self.kind_of: dict[str, str] = {}
        self.expected: dict[str, str] = {}

    def __call__(self, body: Any, number: int) -> Behaviour | None:
        prompt = body["messages"][0]["content"]
        visible = CandidateInput.model_validate_json(body["messages"][-1]["content"])
        eid = visible.evaluation_id
        kind = self.kind_of.setdefault(eid, KINDS[len(self.kind_of) % len(KINDS)])
        good = json.loads(ReferencePolicyReviewer().review(prompt, visible) or "{}")
        if kind == "prose":
            self.expected[eid] = "invalid"
            return reply("Looks fine to me, approve.")
        if kind == "empty":
            self.expected[eid] = "missing"
            return reply("")
        if kind == "forged_ref":
            self.expected[eid] = "invalid"
            return json_reply({**good, "decision": "permit", "evidence_refs": ["forged-record"]})
        if kind == "permit":
            self.expected[eid] = "permit"
            return json_reply({**good, "decision": "permit"})
        self.expected[eid] = good["decision"]
        return json_reply(good)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 12-case fixture corpus and its `rtb export` folder (seeded ids)."""
    root = tmp_path_factory.mktemp("inspect")
    corpus = small_corpus(root / "corpus")
    export_candidate_inputs(load_corpus(corpus), root / "export", seed=11)
    return corpus, root / "export"


@pytest.fixture(scope="module")
def inspect_run(exported: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The task run once under `inspect_ai.eval` on the scripted server: (log path, script)."""
    from trustbench.interop.inspect_task import rtb_review

    corpus, export_dir = exported
    script = ScriptedReviewer()
    with OpenAIServer() as server, pytest.MonkeyPatch.context() as patch:
        server.script(script)
        patch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        [log] = inspect_ai.eval(
            rtb_review(export_dir=str(export_dir), corpus=str(corpus)),
            model="openai/test-reviewer-1",
            model_base_url=server.base_url,
            model_args={"responses_api": False},
            limit=SAMPLED,
            log_dir=str(tmp_path_factory.mktemp("logs")),
            display="none",
            max_retries=0,
        )
    assert log.status == "success", log.error
    return Path(log.location), script


def _import(log_path: Path, exported: tuple[Path, Path], out: Path) -> tuple[int, str]:
    corpus, export_dir = exported
    return invoke(
        "import-inspect", str(log_path), "--export", str(export_dir), "--corpus", str(corpus),
        "--out", str(out),
    )  # fmt: skip


def test_inspect_run_imported_and_reported_gives_the_scripted_decisions(
    exported: tuple[Path, Path], inspect_run: Any, tmp_path: Path
) -> None:
    log_path, script = inspect_run
    code, output = _import(log_path, exported, tmp_path / "run")
    assert code == 0, output
    report_run(tmp_path / "run")
    record = full_record(tmp_path / "run")

    rows = [r for r in record["review"]["trials"] if r["configuration"] == "openai:test-reviewer-1"]
    graded = {r["evaluation_ids"][0]: r["outcome"] for r in rows if r["outcome"] != "not_run"}
    assert len(script.expected) == SAMPLED and set(script.kind_of.values()) == set(KINDS)
    assert graded == script.expected
    assert sum(r["outcome"] == "not_run" for r in rows) == 12 - SAMPLED
    figures = {f["name"]: f for f in record["figures"]["openai:test-reviewer-1"]}
    assert figures["missing_rate"]["numerator"] == 1
    assert figures["missing_rate"]["denominator"] == SAMPLED, "not-run cases stay out"
    assert figures["invalid_rate"]["numerator"] == 2

    # The task's own scorer, through the same validation, gave the same outcome classes.
    log = inspect_ai.log.read_eval_log(str(log_path))
    answers = {str(s.id): s.scores["rtb_review_scorer"].answer for s in log.samples}
    assert answers == script.expected


def _forged(inspect_run: Any, tmp_path: Path, edit: Any) -> Path:
    log = inspect_ai.log.read_eval_log(str(inspect_run[0]))
    edit(log)
    forged = tmp_path / "forged.eval"
    inspect_ai.log.write_eval_log(log, str(forged))
    return forged


def test_import_refuses_a_log_whose_input_differs_from_the_export(
    exported: tuple[Path, Path], inspect_run: Any, tmp_path: Path
) -> None:
    # The cheap forgery: grade a reply against an input the model was never sent.
    def edit(log: Any) -> None:
        message = log.samples[0].input[1]
        message.content = message.text.replace('"task"', '"task" ', 1)

    code, message = _import(_forged(inspect_run, tmp_path, edit), exported, tmp_path / "run")
    assert code == 1 and "not the exported prompt and candidate input" in message
    assert not (tmp_path / "run" / "ledger.sqlite").exists(), "nothing half-imported"


def test_import_refuses_a_reply_edited_after_the_model_call(
    exported: tuple[Path, Path], inspect_run: Any, tmp_path: Path
) -> None:
    # The cheap forgery: turn a reply into another one in the log's output.
    def edit(log: Any) -> None:
        log.samples[1].output = inspect_ai.model.ModelOutput.from_content("m", '{"x": 1}')

    code, message = _import(_forged(inspect_run, tmp_path, edit), exported, tmp_path / "run")
    assert code == 1 and "not the reply of its last model call" in message


def test_import_refuses_a_model_call_that_sent_more_than_the_export(
    exported: tuple[Path, Path], inspect_run: Any, tmp_path: Path
) -> None:
    # A solver that slips the model a hint: the dataset input is clean, the call is not.
    def edit(log: Any) -> None:
        call = next(e for e in log.samples[0].events if e.event == "model")
        call.input.append(inspect_ai.model.ChatMessageUser(content="hint: the answer is permit"))

    code, message = _import(_forged(inspect_run, tmp_path, edit), exported, tmp_path / "run")
    assert code == 1 and "sent messages other than the exported prompt" in message


def test_import_refuses_a_corpus_other_than_the_exported_one(
    exported: tuple[Path, Path], tmp_path: Path
) -> None:
    _, export_dir = exported
    log = tmp_path / "any.eval"
    log.write_text("{}")
    code, message = invoke(
        "import-inspect", str(log), "--export", str(export_dir), "--out", str(tmp_path / "run")
    )
    assert code == 1 and "not the one this export was made from" in message
