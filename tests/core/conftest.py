from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.cli import ALPHA_KEY
from tests.support.echo_track import register, two_candidate_spec, write_corpus
from tests.support.openai_server import OpenAIServer, openai_server  # noqa: F401


@pytest.fixture(autouse=True)
def _echo_track(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    register()
    monkeypatch.setenv("TB_TEST_ALPHA_KEY", ALPHA_KEY)
    yield


@pytest.fixture
def experiment(tmp_path: Path, openai_server: OpenAIServer) -> Path:  # noqa: F811
    """A spec (two candidates, K=3, 4 cases) against the test server; returns the spec path."""
    write_corpus(tmp_path / "corpus", 4)
    spec = tmp_path / "exp.toml"
    spec.write_text(two_candidate_spec(openai_server.base_url))
    return spec
