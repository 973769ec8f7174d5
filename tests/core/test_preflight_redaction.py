"""Preflight probes are redacted like attempts: a server echoing the key never gets it stored."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from tests.support.cli import ALPHA_KEY, invoke
from tests.support.echo_track import two_candidate_spec, write_corpus
from tests.support.openai_server import Behaviour, OpenAIServer, reply

from trustbench.core import build_manifest, read_ledger, register_track, write_manifest

_PROBE = "Reply with the single word: ready"


def _frozen(tmp_path: Path, base_url: str) -> Path:
    write_corpus(tmp_path / "corpus", 1)
    spec = tmp_path / "exp.toml"
    spec.write_text(two_candidate_spec(base_url, trials=1, concurrency=1))
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    return run_dir


def _to_the_probe(behaviour: Behaviour) -> Any:
    def decide(body: dict[str, Any], n: int) -> Behaviour | None:
        return behaviour if _PROBE in json.dumps(body) else None

    return decide


def test_a_preflight_reply_echoing_the_key_as_its_model_is_stored_redacted(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.script(_to_the_probe(reply("ready", model=f"echo-{ALPHA_KEY}")))
    run_dir = _frozen(tmp_path, openai_server.base_url)
    code, message = invoke("run", str(run_dir), "--quiet")
    assert code == 0, message
    assert ALPHA_KEY.encode() not in (run_dir / "ledger.sqlite").read_bytes()
    probes = [json.loads(e["data"]) if isinstance(e["data"], str) else e["data"]
              for e in read_ledger(run_dir).events if e["kind"] == "preflight"]  # fmt: skip
    assert "echo-[REDACTED]" in [p["reported_model"] for p in probes]


def test_a_failed_preflight_quoting_the_key_is_redacted_in_the_message_and_the_ledger(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    body = f'{{"error": "internal error for key {ALPHA_KEY}"}}'
    openai_server.script(_to_the_probe(Behaviour("status", status=500, body=body)))
    run_dir = _frozen(tmp_path, openai_server.base_url)
    code, message = invoke("run", str(run_dir), "--quiet")
    assert code == 2
    assert ALPHA_KEY not in message and "internal error for key [REDACTED]" in message
    assert ALPHA_KEY.encode() not in (run_dir / "ledger.sqlite").read_bytes()


ENCODED_KEY = "sk-tb+Q9/x=Lm:7w!Rz4(pK)*8&Hs2@Vd"
"""A key with reserved characters, so its percent-encoding differs from it."""


def _five_encodings(key: str) -> dict[str, str]:
    raw = key.encode()
    return {
        "base64": base64.b64encode(raw).decode(),
        "urlsafe base64": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "percent-encoded": quote(key, safe=""),
        "hex": raw.hex(),
        "reversed": key[::-1],
    }


def _spellings(text: str) -> set[bytes]:
    """`text` as a file may hold it: as is, JSON-escaped and HTML-escaped."""
    return {text.encode(), json.dumps(text)[1:-1].encode(), html.escape(text).encode()}


def test_a_server_echoing_the_key_in_five_encodings_gets_none_into_any_file_of_the_run(
    tmp_path: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TB_TEST_ALPHA_KEY", ENCODED_KEY)
    register_track("test/echo_graded", "tests.core.test_report_run:GradedEchoTrack")
    encodings = _five_encodings(ENCODED_KEY)
    echoed = " | ".join(f"{name}: {value}" for name, value in encodings.items())

    def echo_the_key(body: dict[str, Any], number: int) -> Behaviour:
        if "case-001" in json.dumps(body):
            return Behaviour("status", status=401, body=json.dumps({"error": echoed}))
        return reply(echoed, model=f"m {encodings['hex']}")

    openai_server.script(echo_the_key)
    write_corpus(tmp_path / "corpus", 2)
    spec = tmp_path / "exp.toml"
    spec.write_text(two_candidate_spec(openai_server.base_url, trials=1, concurrency=1)
                    .replace('track = "echo"', 'track = "echo_graded"'))  # fmt: skip
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    code, out = invoke("run", str(run_dir), "--quiet")
    assert code in (0, 3), out
    failed = [t["error"] for t in read_ledger(run_dir).trials if t["status"] == "failed"]
    assert failed and all("[REDACTED]" in (error or "") for error in failed)  # the 401s
    assert invoke("report", str(run_dir))[0] in (0, 1)
    export = run_dir / "export" / "ledger.jsonl"
    export.parent.mkdir()
    assert invoke("export-ledger", str(run_dir), "--out", str(export))[0] == 0
    assert {"record.json", "report.html", "ledger.sqlite"} <= {p.name for p in run_dir.iterdir()}
    assert b"[REDACTED]" in export.read_bytes()  # the echoes were stored, redacted
    for path in (p for p in run_dir.rglob("*") if p.is_file()):
        stored = path.read_bytes()
        for name, value in encodings.items():
            assert not any(s in stored for s in _spellings(value)), f"{name} in {path.name}"
