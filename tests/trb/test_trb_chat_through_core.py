"""A chat model as a TRB candidate goes through core's provider: retries, rate limit, ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer, probe_reply, rate_limited
from tests.trb.test_trb_profile_track import _governed
from tests.trb.test_trb_track import freeze_run_report, write_spec

from trustbench.core import read_ledger


def _spec(tmp_path: Path, base_url: str) -> Path:
    chat = (
        '[[candidates]]\nname = "chat"\nkind = "openai_chat"\nmodel = "scripted"\n'
        f'base_url = "{base_url}"\nrate_limit_per_s = 500\n'
        "[retry]\ntransport_max_retries = 2\nbackoff_base_s = 0.001\nbackoff_max_s = 0.002\n"
    )
    return write_spec(
        tmp_path,
        {},
        sizes="{ train = 20, eval = 2, transfer = 1 }",
        options='measures = ["governance", "attribution"]\nconformance_traces = 1\n'
        'splits = ["eval", "transfer_wind"]',  # transfer = 1: the first family's one trace
        extra=chat,
    )


def test_a_chat_candidate_is_retried_by_core_and_every_attempt_is_in_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRUSTBENCH_CACHE", str(tmp_path / "cache"))
    with OpenAIServer() as server:
        first: list[int] = []

        def script(body: dict[str, Any], number: int) -> Any:
            if probe_reply(body) is not None:  # the run's preflight probe, before any trial
                return probe_reply(body)
            if not first:  # the first trial request is rate limited once, then answered
                first.append(number)
                return rate_limited("0")
            return _governed(body, number)

        server.script(script)
        record = freeze_run_report(_spec(tmp_path, server.base_url), tmp_path / "run")
        requests = sum(probe_reply(r.body) is None for r in server.requests)
    assert record["trb"]["adapters"]["chat"]["tier"] == "proxy"
    assert record["trb"]["profile"]["chat"]["G"]["status"] == "measured"
    ledger = read_ledger(tmp_path / "run")
    chat_attempts = [a for a in ledger.attempts if a["call"] == "chat"]
    assert len(chat_attempts) == requests  # every HTTP request is a recorded attempt
    assert sum(a["error_class"] == "rate_limited" for a in chat_attempts) == 1
    assert any(a["kind"] == "transport_retry" for a in chat_attempts), json.dumps(
        sorted({a["kind"] for a in chat_attempts})
    )
