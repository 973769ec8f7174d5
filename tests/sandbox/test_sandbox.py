"""One sandbox for every candidate's code: attackers written apart from it find nothing.

The candidates here (`fs_walker.py`, `shm_pair.py`) were written as a cheat would write them,
from the public contract only; each test copies them into a folder of its own, so nothing of the
suite lies beside them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest
from tests.support.child_env import child_env

from trustbench.rtb.heldout._crypto import new_key_pair
from trustbench.rtb.heldout._seal import seal_corpus
from trustbench.sandbox import platform_problem

HERE = Path(__file__).parent
FIXTURE = HERE.parent / "rtb" / "fixtures" / "rtb_v0_2_user"
SPEC = """
suite = "rtb"
track = "review"
trials_per_case = 1
concurrency = 2
timeout_s = 20.0
{isolation}

[corpus]
path = "set"

[[candidates]]
name = "walker"
kind = "inprocess"
entry = "fs_walker:reviewer"

[analysis]
unit = "case"
"""

needs_the_sandbox = pytest.mark.skipif(
    platform_problem() is not None, reason=f"no sandbox here: {platform_problem()}"
)


def _candidate_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "cand"
    folder.mkdir()
    shutil.copy(HERE / "fs_walker.py", folder / "fs_walker.py")
    return folder


def _cli(tmp_path: Path, *args: str, key: Path | None = None) -> subprocess.CompletedProcess[str]:
    extra = {"TRUSTBENCH_HELDOUT_KEY": str(key)} if key else {}
    env = child_env(tmp_path, pythonpath=[tmp_path / "cand"], extra=extra)
    return subprocess.run(
        [sys.executable, "-m", "trustbench", *args],
        cwd=tmp_path, capture_output=True, text=True, check=False, env=env, timeout=120,
    )  # fmt: skip


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _sealed_run(tmp_path: Path, *, isolation: str, key_in_env: bool) -> dict:
    """Seal the fixture (the owner's key on this machine), freeze, run and report the walker."""
    private, public = new_key_pair()
    key = tmp_path / "owner" / "owner.key"
    key.parent.mkdir()
    key.write_text(private + "\n", encoding="utf-8")
    seal_corpus(FIXTURE, public, tmp_path / "set", budget=5, set_id="hs-walk", at="2026-12-01")
    _candidate_folder(tmp_path)
    (tmp_path / "spec.toml").write_text(SPEC.format(isolation=isolation), encoding="utf-8")
    env_key = key if key_in_env else None
    _ok(_cli(tmp_path, "freeze", "spec.toml", "--out", "run", key=env_key))
    _ok(_cli(tmp_path, "run", "run", "--quiet", key=env_key))
    report = _cli(tmp_path, "report", "run", "--heldout-key", str(key), "--json")
    assert report.returncode in (0, 1), report.stdout + report.stderr
    return json.loads(report.stdout)


def _correct(tmp_path: Path) -> float:
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    return {f["name"]: f["estimate"] for f in record["figures"]["walker"]}["correct_decision_rate"]


@needs_the_sandbox
def test_a_filesystem_walking_reviewer_finds_no_key_and_scores_at_chance(tmp_path: Path) -> None:
    # The owner's key lies on this machine, its path even in the run's environment.
    summary = _sealed_run(tmp_path, isolation="", key_in_env=True)
    assert _correct(tmp_path) < 1.0  # held: the one answer it gives without the key
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    mode = record["candidate_isolation"]["walker"]
    assert mode.startswith("landlock ABI") and "ipc/net namespaces" in mode
    assert "could read" not in mode
    assert summary["held_out_set"]["answer_key_available_to_candidate"] is False


def test_the_same_reviewer_unconfined_steals_the_key_and_the_report_says_so(
    tmp_path: Path,
) -> None:
    # The attack is real: with `isolation = "none"` it decrypts the set and scores 5/5.
    summary = _sealed_run(tmp_path, isolation='isolation = "none"', key_in_env=True)
    assert _correct(tmp_path) == 1.0
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    assert record["candidate_isolation"]["walker"].startswith("none")
    assert summary["held_out_set"]["answer_key_available_to_candidate"] is True
    headline = summary["verdicts"]["walker"]["headline"]
    assert 'isolation = "none" for walker' in headline
    assert "ran under: none" in (tmp_path / "run" / "report.html").read_text()


def _shm_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "shm"
    folder.mkdir()
    for name in ("shm_pair.py", "shm_adapters.py"):
        shutil.copy(HERE / name, folder / name)
    return folder


def test_two_candidates_share_system_v_memory_when_unconfined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The channel is real: in one IPC namespace the reader finds the writer's message.
    monkeypatch.syspath_prepend(str(_shm_folder(tmp_path)))
    import shm_pair

    try:
        assert shm_pair.write_secret()
        assert shm_pair.read_secret() == shm_pair.MESSAGE
    finally:
        shm_pair.remove_secret()


@needs_the_sandbox
def test_two_trb_adapters_in_their_workers_cannot_pass_state_through_system_v_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trustbench.trb.corpus import generate_split
    from trustbench.trb.isolation._client import AdapterWorker, adapter_plan

    monkeypatch.syspath_prepend(str(_shm_folder(tmp_path)))
    context = generate_split("eval", 1, seed=1)[0].context(0)
    workers = [
        AdapterWorker(t, adapter_plan(t)) for t in ("shm_adapters:writer", "shm_adapters:reader")
    ]
    try:
        writer, reader = (w.adapter() for w in workers)
        writer.emit_r(context)  # the segment now exists, in the writer's IPC namespace only
        assert reader.emit_r(context) is not None  # the reader found nothing to fail on
        assert all("ipc" in str(w.sandbox) for w in workers)
    finally:
        for worker in workers:
            worker.close()


@needs_the_sandbox
def test_two_sandboxed_entries_cannot_pass_state_through_system_v_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trustbench.sandbox import CandidateWorker, plan_for

    monkeypatch.syspath_prepend(str(_shm_folder(tmp_path)))
    workers = [
        CandidateWorker(e, plan_for(e)) for e in ("shm_pair:write_secret", "shm_pair:read_secret")
    ]
    try:
        write, read = (w.entry_object() for w in workers)
        assert write() is True
        assert read() == b""
    finally:
        for worker in workers:
            worker.close()


def _importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str) -> Path:
    """A folder of its own holding a copy of this folder's `module`, importable by that name."""
    folder = tmp_path / module
    folder.mkdir()
    shutil.copy(HERE / f"{module}.py", folder / f"{module}.py")
    monkeypatch.syspath_prepend(str(folder))
    return folder


class _Platform:
    """A harness object the candidate may call back (as a boundary calls its PlatformView)."""

    def lookup(self, key: str) -> str:
        return key.upper()

    def refuse(self) -> None:
        raise LookupError("the harness's own refusal")


@needs_the_sandbox
def test_a_sandboxed_candidate_is_called_with_the_in_process_arguments_and_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from trustbench.providers._types import ChatReply, ChatRequest
    from trustbench.sandbox import CandidateRaised, CandidateWorker, plan_for

    _importable(tmp_path, monkeypatch, "rpc_candidate")
    worker = CandidateWorker("rpc_candidate:make", plan_for("rpc_candidate:make"))
    try:
        boundary = worker.entry_object()({"k": [1, 2]})
        assert (boundary.name, boundary.enforcement) == ("boundaryish", "enforcing")
        request = ChatRequest(messages=[{"role": "user", "content": "abc"}], temperature=0.5)
        reply = asyncio.run(boundary.authorize(request, _Platform()))
        assert reply == ChatReply(text="ABC:0.5", finish_reason="stop")
        with pytest.raises(CandidateRaised, match="ValueError: the candidate's own failure"):
            boundary.fail()
        with pytest.raises(LookupError, match="the harness's own refusal"):
            boundary.passes_through(_Platform())  # the harness's exception comes back as itself
    finally:
        worker.close()


@needs_the_sandbox
def test_a_candidate_folder_holding_a_link_back_to_itself_still_starts_its_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trustbench.sandbox import CandidateWorker, plan_for

    folder = _importable(tmp_path, monkeypatch, "rpc_candidate")
    (folder / "loop").symlink_to(folder, target_is_directory=True)  # a cycle under the read list
    (folder / "secret").write_text("hidden")  # its folder is then listed entry by entry
    plan = plan_for("rpc_candidate:make", hidden=[str(folder / "secret")])
    worker = CandidateWorker("rpc_candidate:make", plan)
    try:
        assert worker.entry_object()({"k": [1, 2]}).name == "boundaryish"
    finally:
        worker.close()


@needs_the_sandbox
def test_a_worker_that_fails_while_confining_itself_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    from trustbench.sandbox import CandidateWorker, WorkerFailed, plan_for

    _importable(tmp_path, monkeypatch, "rpc_candidate")
    plan = plan_for("rpc_candidate:make")
    unreadable = dataclasses.replace(plan, read=[*plan.read, "bad\x00path"])  # no such path
    worker = CandidateWorker("rpc_candidate:make", unreadable)
    try:
        with pytest.raises(WorkerFailed, match="could not confine the worker: ValueError"):
            worker.entry_object()
    finally:
        worker.close()


def test_a_machine_without_the_sandbox_refuses_candidate_code_unless_isolation_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trustbench.sandbox
    from trustbench.core import check_isolation, load_spec
    from trustbench.errors import InputError

    monkeypatch.setattr(trustbench.sandbox, "platform_problem", lambda: "no Landlock (simulated)")
    spec_file = tmp_path / "spec.toml"
    spec_file.write_text(SPEC.format(isolation=""), encoding="utf-8")
    with pytest.raises(InputError, match=r"no Landlock \(simulated\).*isolation = \"none\"") as no:
        check_isolation(load_spec(spec_file))
    assert no.value.location == "candidate walker"
    spec_file.write_text(SPEC.format(isolation='isolation = "none"'), encoding="utf-8")
    check_isolation(load_spec(spec_file))  # the spec's choice: run unconfined, and say so


def test_the_trb_worker_uses_emit_many_and_closes_each_adapter_it_drops() -> None:
    from trustbench.trb.adapter import SelfReport, StepContext
    from trustbench.trb.corpus import generate_split
    from trustbench.trb.instruments import GovernedOracle
    from trustbench.trb.isolation._worker import _Session

    class Batched(GovernedOracle):
        calls: ClassVar[list[str]] = []

        def emit_r(self, context: StepContext) -> SelfReport:
            self.calls.append("emit_r")
            return super().emit_r(context)

        def emit_many(self, contexts: list[StepContext]) -> list[SelfReport]:
            self.calls.append(f"emit_many({len(contexts)})")
            return [super(Batched, self).emit_r(c) for c in contexts]

        def close(self) -> None:
            self.calls.append("close")

    trace = generate_split("eval", 1, seed=3)[0]
    contexts = [trace.context(t).model_dump(mode="json") for t in range(3)]
    session = _Session(Batched)
    handle = session.new()["handle"]
    answers = session.call({"handle": handle, "hook": "emit_r", "contexts": contexts})
    assert [sorted(a) for a in answers] == [["report"]] * 3
    session.close(handle)
    assert Batched.calls == ["emit_many(3)", "close"]


WORKFLOW_SPEC = """
suite = "rtb"
track = "workflow"
trials_per_case = 1
concurrency = 2
{isolation}

[corpus]
builtin = "v0.1"

[track_options]
kinds = ["direct"]

[[candidates]]
name = "walker"
kind = "inprocess"
entry = "fs_walker:agent"
settings = {{ agent = "walker", boundary_entry = "fs_walker:boundary" }}
"""


def _workflow_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolation: str) -> list[dict]:
    """Run the walker as agent and boundary; the walk starts beside its run folder."""
    from trustbench.core import read_ledger, run_spec

    monkeypatch.syspath_prepend(str(_candidate_folder(tmp_path)))
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "workflow.toml"
    spec.write_text(WORKFLOW_SPEC.format(isolation=isolation), encoding="utf-8")
    run_spec(spec, tmp_path / "run")
    return read_ledger(tmp_path / "run").trials


@needs_the_sandbox
def test_a_filesystem_walking_agent_and_boundary_find_nothing_in_the_workflow_track(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trials = _workflow_run(tmp_path, monkeypatch, isolation="")
    assert trials and all(t["status"] == "completed" for t in trials)
    assert {t["outcome"]["run"]["agent"] for t in trials} == {"honest"}
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    assert record["candidate_isolation"]["walker"].startswith("landlock ABI")


def test_the_same_agent_unconfined_finds_the_ledger_and_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The attack is real: in the harness process the walk finds the run folder and the corpus.
    with pytest.raises(Exception, match="found grader-only files"):
        _workflow_run(tmp_path, monkeypatch, isolation='isolation = "none"')


# ------------------------------------------------------------------------------------------------
# The environment: a worker inherits the runtime's variables and its candidate's declared one.

HARNESS_KEY = "sk-harness-key-of-another-candidate-0123"


def _worker_environment(entry: str, variables: list[str] | None = None) -> dict[str, str]:
    from trustbench.sandbox import CandidateWorker, plan_for

    # The environment is set when the worker starts, whatever confines it afterwards.
    worker = CandidateWorker(entry, plan_for(entry, variables=variables or []), fallback=True)
    try:
        return worker.entry_object()({})
    finally:
        worker.close()


def test_a_sandboxed_candidate_reads_no_harness_variable_off_the_runtime_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fnmatch import fnmatchcase

    from trustbench.sandbox._rpc import RUNTIME_VARIABLES

    _importable(tmp_path, monkeypatch, "env_reader")
    monkeypatch.setenv("OPENAI_API_KEY", HARNESS_KEY)
    monkeypatch.setenv("SECRET_X", "cloud-credential-of-the-operator")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # a runtime knob, on the list
    seen = _worker_environment("env_reader:environment")
    assert "OPENAI_API_KEY" not in seen and "SECRET_X" not in seen
    assert HARNESS_KEY not in json.dumps(seen)
    assert seen["OMP_NUM_THREADS"] == "3"
    homes = {"HOME", "TMPDIR", "TEMP", "TMP", "PWD", "XDG_CACHE_HOME", "TRUSTBENCH_CACHE",
             "PYTHONPATH", "PYTHONDONTWRITEBYTECODE"}  # fmt: skip
    off_the_list = [
        name
        for name in set(seen) - homes
        if not any(fnmatchcase(name, pattern) for pattern in RUNTIME_VARIABLES)
    ]
    assert off_the_list == []
    assert seen["HOME"] == seen["TMPDIR"] != str(Path.home())


def test_a_declared_variable_reaches_its_own_worker_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _importable(tmp_path, monkeypatch, "env_reader")
    monkeypatch.setenv("TB_MINE_KEY", "sk-mine-0123456789")
    monkeypatch.setenv("TRUSTBENCH_HELDOUT_KEY", "tbx25519-private:never-passed")
    mine = _worker_environment("env_reader:environment", ["TB_MINE_KEY", "TRUSTBENCH_HELDOUT_KEY"])
    other = _worker_environment("env_reader:environment")
    assert mine["TB_MINE_KEY"] == "sk-mine-0123456789"
    assert "TB_MINE_KEY" not in other
    assert "TRUSTBENCH_HELDOUT_KEY" not in mine  # the harness's own, even when declared


TWO_CANDIDATES = """
suite = "rtb"
track = "review"
trials_per_case = 1
concurrency = 2
timeout_s = 20.0

[corpus]
path = "{corpus}"

[[candidates]]
name = "alpha"
kind = "inprocess"
entry = "env_reader:reviewer"
api_key_env = "TB_ALPHA_OWN_KEY"

[[candidates]]
name = "beta"
kind = "inprocess"
entry = "env_reader:reviewer"
api_key_env = "TB_BETA_OWN_KEY"

[analysis]
unit = "case"
"""


@needs_the_sandbox
def test_each_candidate_worker_of_a_run_gets_its_own_declared_key_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trustbench.core import read_ledger, run_spec

    _importable(tmp_path, monkeypatch, "env_reader")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", HARNESS_KEY)
    monkeypatch.setenv("TB_ALPHA_OWN_KEY", "sk-alpha-own-key-0123456789")
    monkeypatch.setenv("TB_BETA_OWN_KEY", "sk-beta-own-key-0123456789")
    spec = tmp_path / "spec.toml"
    spec.write_text(TWO_CANDIDATES.format(corpus=FIXTURE), encoding="utf-8")
    run_spec(spec, tmp_path / "run")
    ledger = read_ledger(tmp_path / "run")
    candidate_of = {trial["trial_id"]: trial["candidate"] for trial in ledger.trials}
    seen: dict[str, set[str]] = {"alpha": set(), "beta": set()}
    for attempt in ledger.attempts:
        names = json.loads(json.loads(attempt["raw_response"])["text"])
        seen[candidate_of[attempt["trial_id"]]].update(names)
    assert "TB_ALPHA_OWN_KEY" in seen["alpha"] and "TB_BETA_OWN_KEY" not in seen["alpha"]
    assert "TB_BETA_OWN_KEY" in seen["beta"] and "TB_ALPHA_OWN_KEY" not in seen["beta"]
    assert not {"OPENAI_API_KEY"} & (seen["alpha"] | seen["beta"])


def test_an_inprocess_candidate_whose_declared_variable_is_unset_at_run_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.cli import invoke

    _importable(tmp_path, monkeypatch, "env_reader")
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "spec.toml"
    spec.write_text(TWO_CANDIDATES.format(corpus=FIXTURE), encoding="utf-8")
    monkeypatch.setenv("TB_ALPHA_OWN_KEY", "sk-alpha-own-key-0123456789")
    monkeypatch.delenv("TB_BETA_OWN_KEY", raising=False)
    code, output = invoke("freeze", str(spec), "--out", "run", "--allow-missing-keys")
    assert code == 0, output
    code, message = invoke("run", "run", "--quiet")
    assert code == 2 and "TB_BETA_OWN_KEY is not set" in message
    assert "candidates/1/api_key_env" in message
    assert not (tmp_path / "run" / "ledger.sqlite").exists()
