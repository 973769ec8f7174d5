"""Preflight probes are redacted like attempts: a server echoing the key never gets it stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.cli import ALPHA_KEY, invoke
from tests.support.echo_track import two_candidate_spec, write_corpus
from tests.support.openai_server import Behaviour, OpenAIServer, reply

from trustbench.core import build_manifest, read_ledger, write_manifest

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
