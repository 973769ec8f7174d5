"""The preflight under the spec's retry policy; calls a failed preflight cancels say so.

One 429 used to stop a run (exit 2) that completed every trial with `--no-preflight`; the probe
now goes through the trials' retry loop, and only its last attempt's failure stops the run.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.core.test_preflight import _is_probe
from tests.core.test_preflight import _preflight_events as _probe_events
from tests.support.child_env import child_env
from tests.support.cli import ALPHA_KEY, invoke
from tests.support.echo_track import two_candidate_spec, write_corpus
from tests.support.openai_server import Behaviour, OpenAIServer, rate_limited, reply, server_error

from trustbench.core import build_manifest, read_ledger, write_manifest

ROOT = Path(__file__).resolve().parents[2]


def _frozen(tmp_path: Path, base_url: str, extra: str = "") -> Path:
    write_corpus(tmp_path / "corpus", 2)
    spec = tmp_path / "exp.toml"
    spec.write_text(two_candidate_spec(base_url, trials=1, extra=extra))
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)
    return run_dir


def _run_cli(run_dir: Path) -> subprocess.CompletedProcess[str]:
    """`trustbench run RUN_DIR --quiet` in a process of its own, as a user runs it."""
    env = child_env(run_dir.parent, pythonpath=[ROOT], extra={"TB_TEST_ALPHA_KEY": ALPHA_KEY})
    return subprocess.run(
        [sys.executable, "-m", "tests.support.trustbench_cli", "run", str(run_dir), "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_probe_answered_429_is_retried_and_the_run_completes_with_the_retry_recorded(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    probes: list[str] = []

    def first_probe_rate_limited(body: Any, number: int) -> Behaviour | None:
        if not _is_probe(body):
            return None
        probes.append(body["model"])
        return rate_limited(retry_after="0") if len(probes) == 1 else reply("ready")

    openai_server.script(first_probe_rate_limited)
    run_dir = _frozen(tmp_path, openai_server.base_url)
    done = _run_cli(run_dir)
    assert done.returncode == 0, done.stderr
    limited_model = probes[0]
    limited = "alpha" if limited_model == "alpha-model" else "beta"
    mine = [e for e in _probe_events(run_dir) if e["candidate"] == limited]
    assert [(e["attempt"], e["kind"], e["error_class"], e["http_status"]) for e in mine] == [
        (1, "first", "rate_limited", 429),
        (2, "transport_retry", None, 200),
    ]
    assert mine[0]["retry_after_s"] == 0.0
    ledger = read_ledger(run_dir)
    assert len(ledger.trials) == 4 and {t["status"] for t in ledger.trials} == {"completed"}


def test_a_probes_retry_waits_for_the_servers_retry_after(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    arrivals: list[float] = []

    def probe_limited_once(body: Any, number: int) -> Behaviour | None:
        if not (_is_probe(body) and body["model"] == "alpha-model"):
            return None
        arrivals.append(time.monotonic())
        return rate_limited(retry_after="0.6") if len(arrivals) == 1 else reply("ready")

    openai_server.script(probe_limited_once)
    run_dir = _frozen(tmp_path, openai_server.base_url)
    code, out = invoke("run", str(run_dir), "--quiet")
    assert code == 0, out
    assert len(arrivals) == 2 and arrivals[1] - arrivals[0] >= 0.55  # backoff alone: <= 0.05 s


def test_a_server_that_always_answers_500_stops_the_run_after_the_retry_limit(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.script(lambda body, number: server_error())
    run_dir = _frozen(tmp_path, openai_server.base_url)
    done = _run_cli(run_dir)
    assert done.returncode == 2, done.stderr
    assert "preflight: candidate 'alpha'" in done.stderr and "HTTP 500" in done.stderr
    assert "failed before any trial was sent" in done.stderr
    assert "Traceback" not in done.stderr
    alpha = [e for e in _probe_events(run_dir) if e["candidate"] == "alpha"]
    # transport_max_retries = 3 in the spec: the trials' limit, 4 attempts in all.
    assert [e["attempt"] for e in alpha] == [1, 2, 3, 4]
    assert {e["error_class"] for e in alpha} == {"server_error"}
    sent = [r for r in openai_server.requests if _is_probe(r.body)]
    assert sum(r.body["model"] == "alpha-model" for r in sent) == 4
    assert read_ledger(run_dir).trials == []
