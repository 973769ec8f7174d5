"""Invalid replies are explained: top reasons with counts and one example, in CLI and report."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from tests.core.test_preflight import _frozen
from tests.support.cli import invoke
from tests.support.openai_server import (
    OpenAIServer,
    openai_server,  # noqa: F401
    reply,
)
from tests.support.records import full_record
from typer.testing import CliRunner

from trustbench.cli import app
from trustbench.rtb.review._validation import (
    Outcome,
    ValidatedResponse,
    invalid_reasons,
    reason_lines,
    reason_shape,
)


def _trial(candidate: str, reason: str | None, outcome: Outcome = Outcome.INVALID) -> object:
    validated = ValidatedResponse(outcome=outcome, invalid_reason=reason)
    return SimpleNamespace(candidate=candidate, validated=validated, raw_reply="raw")


def test_reasons_differing_only_in_values_are_one_group_with_the_first_as_example() -> None:
    trials = [
        _trial("a", "/evidence_refs/0 'x-1' resolves to no record"),
        _trial("a", "/evidence_refs/2 'y-9' resolves to no record"),
        _trial("a", "reply is not valid JSON: Expecting ',' at line 1 column 57"),
        _trial("a", None, Outcome.DENY),
        _trial("b", None, Outcome.MISSING),
    ]
    groups = invalid_reasons(trials)
    assert list(groups) == ["a"]
    top = groups["a"][0]
    assert top["count"] == 2 and top["example"] == "/evidence_refs/0 'x-1' resolves to no record"
    assert top["reason"] == reason_shape(top["example"])
    lines = reason_lines(groups)
    assert lines[0].startswith("a: 2 of 3 invalid replies: /evidence_refs/N '…' resolves")


def test_report_prints_why_replies_with_a_preamble_were_invalid_under_strict(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    openai_server.script(
        lambda body, n: reply('Sure! Here it is:\n```json\n{"decision": "deny"}\n```')
    )
    run_dir = _frozen(tmp_path, openai_server.base_url)
    code, out = invoke("run", str(run_dir), "--quiet")
    assert code in (0, 1), out
    out = CliRunner().invoke(app, ["report", str(run_dir)]).output  # printed before exit 1
    planned = len(full_record(run_dir)["review"]["trials"])
    assert "note: llm:" in out and "invalid replies: reply is not a single JSON object" in out
    assert "(e.g. " in out
    record = json.loads((run_dir / "record.json").read_text())
    groups = record["review"]["invalid_reasons"]["llm"]
    assert sum(g["count"] for g in groups) >= 1 and planned >= 1
    assert record["review"]["answer_extraction"] == "strict"
    assert "Invalid replies: top reasons" in (run_dir / "report.html").read_text()
