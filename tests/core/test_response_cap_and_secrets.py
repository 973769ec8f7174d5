"""Bad input and secrets: the response-size cap, redaction, inline credentials refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.cli import ALPHA_KEY, invoke
from tests.support.echo_track import two_candidate_spec, write_corpus
from tests.support.openai_server import Behaviour, OpenAIServer, raw_body, reply

from trustbench.core import (
    build_manifest,
    read_ledger,
    run_experiment,
    verify_run,
    write_manifest,
)
from trustbench.core.spec._spec import parse_spec


def _run(tmp_path: Path, base_url: str, extra: str = "") -> Path:
    write_corpus(tmp_path / "corpus", 2)
    spec = tmp_path / "exp.toml"
    spec.write_text(two_candidate_spec(base_url, trials=1, extra=extra))
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir)
    return run_dir


def test_a_reply_over_the_size_cap_is_stored_truncated_flagged_and_never_a_reply(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.on("case-000", reply("x" * 50_000), reply("y" * 50_000))
    run_dir = _run(tmp_path, openai_server.base_url, "max_response_bytes = 4096")
    ledger = read_ledger(run_dir)
    capped = [a for a in ledger.attempts if a["error_class"] == "response_too_large"]
    assert len(capped) == 2, "one per candidate on case-000, not retried"
    for attempt in capped:
        assert len(attempt["raw_response"].encode()) == 4096
        assert "truncated: true" in attempt["error_message"]
    failed = {t["trial_id"]: t for t in ledger.trials if t["status"] == "failed"}
    assert {t["error_class"] for t in failed.values()} == {"response_too_large"}
    assert {t["case_id"] for t in failed.values()} == {"case-000"}
    assert (run_dir / "ledger.sqlite").stat().st_size < 200_000


def test_the_size_cap_is_a_declared_spec_field_with_a_floor() -> None:
    base = {"suite": "t", "track": "t", "corpus": {"path": "c"}}
    base["candidates"] = [{"name": "a", "kind": "inprocess"}]
    assert parse_spec(base, source="s").max_response_bytes == 4 * 1024 * 1024
    with pytest.raises(Exception, match="max_response_bytes"):
        parse_spec({**base, "max_response_bytes": 10}, source="s")


def test_a_server_echoing_the_api_key_never_gets_it_into_the_ledger(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    echoed = json.dumps({"echo": {"authorization": f"Bearer {ALPHA_KEY}"}})
    openai_server.on("case-000", raw_body(echoed), raw_body(echoed))
    openai_server.on(
        "case-001",
        Behaviour("status", status=401, body=f'{{"error": "bad key {ALPHA_KEY}"}}'),
        Behaviour("status", status=401, body=f'{{"error": "bad key {ALPHA_KEY}"}}'),
    )
    run_dir = _run(tmp_path, openai_server.base_url)
    assert any(
        r.headers.get("authorization") == f"Bearer {ALPHA_KEY}" for r in openai_server.requests
    )
    for path in run_dir.iterdir():
        assert ALPHA_KEY.encode() not in path.read_bytes(), path.name
    ledger = read_ledger(run_dir)
    assert any("Bearer [REDACTED]" in (a["raw_response"] or "") for a in ledger.attempts)
    assert any("bad key [REDACTED]" in (t["error"] or "") for t in ledger.trials)


def test_a_request_quoting_the_api_key_is_stored_redacted_and_still_verifies(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    # A case text that quotes the key: the request sent carries it, the one stored must not.
    write_corpus(tmp_path / "corpus", 2)
    quoting = {"id": "case-001", "prompt": f"rotate {ALPHA_KEY} now; " + "context " * 60}
    (tmp_path / "corpus" / "cases" / "case-001.json").write_text(json.dumps(quoting))
    spec = tmp_path / "exp.toml"
    spec.write_text(two_candidate_spec(openai_server.base_url, trials=1))
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir)
    assert any(ALPHA_KEY in json.dumps(r.body) for r in openai_server.requests)
    assert ALPHA_KEY.encode() not in (run_dir / "ledger.sqlite").read_bytes()
    ledger = read_ledger(run_dir)
    quoted = [
        a["request"]["messages"][-1]["content"]
        for a in ledger.attempts
        if a["trial_id"].startswith("case-001/")
    ]
    assert quoted and all(m.startswith("rotate [REDACTED] now; ") for m in quoted)
    assert verify_run(run_dir).ok


@pytest.mark.parametrize(
    ("candidate", "field"),
    [
        ({"settings": {"api_key": "sk-1"}}, "settings.api_key"),
        ({"settings": {"headers": {"Authorization": "Bearer sk-1"}}}, "settings.headers.Author"),
        ({"settings": {"extra": [{"x-api-key": "sk-1"}]}}, "settings.extra[0].x-api-key"),
        ({"settings": {"client": {"access_token": "t"}}}, "settings.client.access_token"),
        ({"base_url": "http://127.0.0.1:1/v1?api_key=sk-1"}, "query parameter 'api_key'"),
        ({"base_url": "http://127.0.0.1:1/v1?key=sk-1"}, "query parameter 'key'"),
        ({"base_url": "http://127.0.0.1:1/v1?x=1&token=t"}, "query parameter 'token'"),
    ],
)
def test_inline_credentials_anywhere_in_a_candidate_are_refused_naming_the_field(
    candidate: dict[str, object], field: str
) -> None:
    entry = {"name": "a", "kind": "openai_chat", "model": "m", "base_url": "http://127.0.0.1:1/v1"}
    spec = {"suite": "t", "track": "t", "corpus": {"path": "c"}, "candidates": [entry | candidate]}
    with pytest.raises(Exception, match="looks like a credential") as raised:
        parse_spec(spec, source="exp.toml")
    assert field in str(raised.value) and "exp.toml#/candidates/0/" in str(raised.value)


def test_inline_credentials_in_track_options_are_refused_and_ordinary_settings_pass(
    tmp_path: Path,
) -> None:
    entry = {"name": "a", "kind": "inprocess", "settings": {"max_tokens": 5, "temperature": 0}}
    spec = {"suite": "t", "track": "t", "corpus": {"path": "c"}, "candidates": [entry]}
    assert parse_spec(spec, source="s").candidates[0].settings["max_tokens"] == 5
    spec["track_options"] = {"judge": {"password": "hunter2"}}
    path = tmp_path / "exp.json"
    path.write_text(json.dumps(spec))
    code, message = invoke("freeze", str(path), "--out", str(tmp_path / "run"))
    assert code == 2 and "track_options.judge.password looks like a credential" in message


def test_a_reply_nested_too_deeply_to_parse_is_a_malformed_response_not_a_harness_error(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    openai_server.on("case-000", raw_body(deep), raw_body(deep))
    run_dir = _run(tmp_path, openai_server.base_url)
    ledger = read_ledger(run_dir)
    failed = [t for t in ledger.trials if t["status"] == "failed"]
    assert {t["error_class"] for t in failed} == {"malformed_response"}
    assert len(failed) == 2
