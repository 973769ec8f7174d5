"""Adapter isolation: a user adapter runs sandboxed and sees only contexts, with opaque ids."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.support.child_env import child_env
from tests.trb.test_trb_track import figure, freeze_run_report, write_spec

from trustbench.errors import InputError
from trustbench.sandbox import abi_version
from trustbench.trb.adapter import SelfReport, StepContext
from trustbench.trb.cheats import _gaming as _memoriser
from trustbench.trb.cheats import memoriser
from trustbench.trb.corpus import generate_split
from trustbench.trb.instruments import GovernedOracle
from trustbench.trb.isolation._client import (
    AdapterFailed,
    AdapterWorker,
    adapter_plan,
    refuse_overlap,
)
from trustbench.trb.track._profile import RecordingAdapter

HERE = Path(__file__).parent


def _worker(target: str, *, fallback: bool = False, declared: str | None = None) -> AdapterWorker:
    """`target`'s worker; `declared`: the variable its candidate declares (`api_key_env`)."""
    plan = adapter_plan(target, variables=[declared] if declared else [])
    return AdapterWorker(target, plan, fallback=fallback)


def _store_corpus(folder: Path) -> list[Any]:
    """Write an eval split as JSON lines, the way a corpus folder holds it."""
    traces = generate_split("eval", 3, seed=5)
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(t.model_dump(mode="json")) for t in traces]
    (folder / "eval.jsonl").write_text("\n".join(lines) + "\n")
    return traces


def test_memoriser_reads_the_corpus_when_it_runs_in_the_harness_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cheat is real: unsandboxed, it finds a corpus in the cache and answers from it.
    traces = _store_corpus(tmp_path / "cache" / "trb" / "corpora" / "x")
    monkeypatch.setenv("TRUSTBENCH_CACHE", str(tmp_path / "cache"))
    cheat = memoriser()
    step = traces[0].steps[2]
    got = cheat.emit_r(traces[0].context(step.t))
    assert cheat.files_read >= 1
    assert got.model_dump(exclude={"caused_by_self"}) == step.r.model_dump(
        exclude={"caused_by_self"}
    )


def test_memoriser_skips_a_fifo_named_like_a_corpus_file_and_reads_the_real_one(
    tmp_path: Path,
) -> None:
    # Another test left `eval.jsonl` as a FIFO in /tmp: opening it waited for a writer forever.
    _store_corpus(tmp_path / "real")
    os.mkfifo(tmp_path / "eval.jsonl")
    cheat = _memoriser.Memoriser()
    walk = threading.Thread(target=cheat._walk, args=(tmp_path, 0, set(), [100]), daemon=True)
    walk.start()
    walk.join(timeout=30)
    assert not walk.is_alive(), "the memoriser is waiting on the FIFO"
    assert cheat.files_read == 1


def test_memoriser_searches_its_own_cache_even_when_its_parent_names_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A user's shell exporting TRUSTBENCH_CACHE above the harness hid the harness's own value.
    parent = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        env=child_env(tmp_path, extra={"TRUSTBENCH_CACHE": "/nonexistent/parents-cache"}),
    )
    try:
        monkeypatch.setattr(_memoriser.os, "getppid", lambda: parent.pid)
        monkeypatch.setenv("TRUSTBENCH_CACHE", str(tmp_path / "cache"))
        places = _memoriser._places()
    finally:
        parent.communicate(b"")
    assert tmp_path / "cache" in places
    assert Path("/nonexistent/parents-cache") in places


@pytest.mark.parametrize("fallback", [False, True], ids=["landlock", "audit-hook"])
def test_an_isolated_adapter_that_opens_a_file_outside_its_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fallback: bool
) -> None:
    if not fallback and abi_version() < 1:
        pytest.skip("this kernel has no Landlock")
    secret = tmp_path / "secret.txt"
    secret.write_text("Phi")
    monkeypatch.setenv("TRB_TEST_SECRET_PATH", str(secret))  # declared: its worker gets it
    monkeypatch.syspath_prepend(str(HERE))
    worker = _worker(
        "trb_isolation_adapters:opens_the_secret",
        fallback=fallback,
        declared="TRB_TEST_SECRET_PATH",
    )
    try:
        adapter = worker.adapter()
        assert worker.sandbox is not None
        assert worker.sandbox.startswith("python audit hook" if fallback else "landlock")
        context = generate_split("eval", 1, seed=1)[0].context(0)
        with pytest.raises(AdapterFailed, match="PermissionError"):
            adapter.emit_r(context)
    finally:
        worker.close()


def test_a_worker_that_dies_fails_its_trial_and_a_fresh_one_serves_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    worker = _worker("trb_isolation_adapters:dies_on_its_second_report", fallback=True)
    context = generate_split("eval", 1, seed=1)[0].context(0)
    try:
        adapter = worker.adapter()
        assert adapter.emit_r(context) is not None
        with pytest.raises(AdapterFailed, match=r"adapter worker of .*dies_on_its_second_report"):
            adapter.emit_r(context)
        assert worker.adapter().emit_r(context) is not None  # a fresh process: its first report
    finally:
        worker.close()


def test_the_memoriser_finds_nothing_in_its_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = _store_corpus(tmp_path / "cache" / "trb" / "corpora" / "x")
    monkeypatch.setenv("TRUSTBENCH_CACHE", str(tmp_path / "cache"))
    # The cache's path in a variable its candidate declares: the one it is handed.
    monkeypatch.setenv("TRB_CORPUS_HINT", str(tmp_path / "cache"))
    worker = _worker("trustbench.trb.cheats:memoriser", declared="TRB_CORPUS_HINT")
    try:
        adapter = worker.adapter()
        step = traces[0].steps[2]
        assert adapter.emit_r(traces[0].context(step.t)).caused_by_self == 0.5  # its fallback
    finally:
        worker.close()


class _Spy(GovernedOracle):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def emit_r(self, context: StepContext) -> SelfReport:
        self.seen.append(context.trace_id)
        return super().emit_r(context)


def test_trace_ids_reach_the_adapter_opaque_and_stable_within_a_run() -> None:
    trace = generate_split("eval", 1, seed=2)[0]
    spies = []
    for key in ("run-a", "run-a", "run-b"):
        spy = _Spy()
        recorder = RecordingAdapter(spy)
        recorder.blind_key = key
        recorder.emit_r(trace.context(0))
        spies.append(spy.seen[0])
    assert "eval" not in spies[0] and spies[0].startswith("trace-")
    assert spies[0] == spies[1] != spies[2]


def test_a_readable_path_holding_the_corpus_or_cache_is_refused(tmp_path: Path) -> None:
    corpus = tmp_path / "project" / "corpus"
    corpus.mkdir(parents=True)
    with pytest.raises(InputError, match="holds the corpus"):
        refuse_overlap([str(tmp_path / "project")], {"corpus": corpus})
    refuse_overlap([str(tmp_path / "elsewhere")], {"corpus": corpus})


def test_a_memoriser_submitted_to_a_trb_run_ends_at_chance_in_its_sandbox(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path,
        {
            "memoriser": "trustbench.trb.cheats:memoriser",
            "spy": "trb_isolation_adapters:sees_trace_ids",
        },
        sizes="{ train = 20, eval = 6, transfer = 6 }",
        options='splits = ["eval", "transfer_wind"]',
    )
    import sys

    sys.path.insert(0, str(HERE))
    try:
        record = freeze_run_report(spec, tmp_path / "run")
    finally:
        sys.path.remove(str(HERE))
    assert figure(record, "memoriser", "G_star")["estimate"] == pytest.approx(0.0, abs=0.01)
    assert figure(record, "memoriser", "balanced_accuracy")["estimate"] == pytest.approx(0.5)
    isolation = record["trb"]["adapters"]["memoriser"]["isolation"]
    assert isolation.startswith(("landlock", "python audit hook"))
    # The spy withholds its attribution wherever the id it saw named a split: nowhere.
    assert figure(record, "spy", "balanced_accuracy")["estimate"] == pytest.approx(1.0)
    assert figure(record, "spy", "attribution_missing_rate")["estimate"] == 0.0


def test_a_second_measure_on_an_axis_is_refused_naming_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from trustbench.trb.track import load_measures

    monkeypatch.syspath_prepend(str(HERE))
    with pytest.raises(InputError, match="both fill the profile axis 'G'"):
        load_measures(["governance", "trb_outside_measure:SECOND_GOVERNANCE"])
    loaded = load_measures(["governance", "trb_outside_measure:PLAIN"])
    assert [m.axis for m, _ in loaded] == ["G", "attr"]
