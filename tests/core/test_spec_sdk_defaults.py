"""API candidates without a base URL default as the vendors' SDKs do (URL and key variable)."""

from __future__ import annotations

import pytest

from trustbench.core.spec._spec import CandidateSpec


def _candidate(**fields: object) -> CandidateSpec:
    return CandidateSpec.model_validate({"name": "c", "model": "m", **fields})


def test_openai_candidate_without_base_url_uses_the_public_endpoint_and_openai_api_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    candidate = _candidate(kind="openai_chat")
    assert candidate.base_url == "https://api.openai.com/v1"
    assert candidate.api_key_env == "OPENAI_API_KEY"


def test_openai_base_url_variable_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9999/v1/")
    assert _candidate(kind="openai_chat").base_url == "http://127.0.0.1:9999/v1"


def test_anthropic_candidate_defaults_to_anthropic_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    candidate = _candidate(kind="anthropic_messages")
    assert (candidate.base_url, candidate.api_key_env) == (
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
    )


def test_an_explicit_base_url_without_key_variable_sends_no_key() -> None:
    candidate = _candidate(kind="openai_chat", base_url="http://127.0.0.1:8000/v1")
    assert candidate.api_key_env is None


def test_an_explicit_key_variable_is_kept() -> None:
    candidate = _candidate(kind="anthropic_messages", api_key_env="MY_KEY")
    assert candidate.api_key_env == "MY_KEY"
