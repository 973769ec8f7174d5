"""An outside attacker's candidates against the candidate sandbox (issue 52), through the real CLI.

`outside_attacker.py` was written without reading the sandbox's code: one module that serves as
an in-process reviewer, a workflow agent, a workflow boundary and a control boundary, each trying
every channel a determined candidate would (the package's corpus, a filesystem walk for keys,
ledgers and labels, `/proc` of the harness, inherited descriptors, ptrace, `process_vm_readv`, a
subprocess, the network, writes outside its folder, the objects it is handed, and, for a pair of
candidates, System V and POSIX shared memory and an abstract unix socket). Each candidate reports
what it reached in a field the harness records (a reply's `reported_model`, an error message), and
the test reads it back from `trustbench export-ledger`. A channel that leaks keeps its test, marked
`xfail(strict=True)` with what leaked, so the test starts passing (and the mark must go) once the
sandbox closes it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.sandbox import outside_attacker
from tests.support.child_env import child_env

import trustbench

ATTACKER = Path(outside_attacker.__file__)
SOURCE_ROOT = Path(trustbench.__file__).resolve().parents[1]
V03 = Path(trustbench.__file__).resolve().parent / "rtb" / "corpus" / "v0.3"

SINGLE_CHANNELS = (
    "package_resources",
    "package_file_paths",
    "corpus_loader",
    "loaded_modules_heap",
    "filesystem_walk_keys_ledgers",
    "clear_case_copies",
    "environment",
    "home_cache",
    "write_outside",
    "proc_ppid_environ",
    "proc_ppid_cmdline",
    "proc_ppid_fd",
    "proc_ppid_mem",
    "inherited_fds",
    "ptrace_attach",
    "process_vm_readv",
    "subprocess",
    "tcp_loopback",
    "argument_objects",
)
"""Every channel one candidate probes on its own (`outside_attacker.probe_all`)."""

LEAKS: dict[str, str] = {}
"""Channels found open, with what leaked (marked xfail, strict). Empty: the two found by this
attacker (a filesystem walk reaching the owner's keys and other runs' ledgers, and the clear
`rtb split` cases, both through the harness's working folder granted as an import root) were
closed by granting a worker only its module's own folder (`sandbox._rpc.module_paths`)."""


def _channels(extra: tuple[str, ...] = ()) -> list[Any]:
    return [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=LEAKS[name]))
        if name in LEAKS
        else name
        for name in (*SINGLE_CHANNELS, *extra)
    ]


@dataclass
class Lab:
    """One folder laid out as an owner and an operator would on one machine, and the runs in it."""

    root: Path
    env: dict[str, str]

    def cli(
        self, *args: str, extra: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **(extra or {})}
        return subprocess.run(
            [sys.executable, "-m", "trustbench", *args],
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )

    def run(
        self, spec: str, folder: str, *run_args: str, extra: dict[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """Freeze and run `spec`, and return every report its candidates left in the ledger."""
        (self.root / f"{folder}.toml").write_text(spec)
        frozen = self.cli("freeze", f"{folder}.toml", "--out", folder, extra=extra)
        if frozen.returncode == 2 and "sandbox" in (frozen.stderr + frozen.stdout).lower():
            pytest.skip(f"no candidate sandbox on this machine: {frozen.stderr.strip()[:200]}")
        assert frozen.returncode == 0, frozen.stderr
        ran = self.cli("run", folder, "--quiet", *run_args, extra=extra)
        assert ran.returncode in {0, 4}, ran.stderr
        exported = self.cli("export-ledger", folder, "--out", f"{folder}.jsonl")
        assert exported.returncode == 0, exported.stderr
        return _reports((self.root / f"{folder}.jsonl").read_text())


def _reports(ledger_lines: str) -> list[dict[str, Any]]:
    """Every `ATTACK-FINDINGS:` JSON in the exported ledger (replies and error messages)."""
    found: list[dict[str, Any]] = []

    def walk(value: object) -> None:
        if isinstance(value, str) and outside_attacker.MARKER in value:
            text = value[value.index(outside_attacker.MARKER) + len(outside_attacker.MARKER) :]
            try:
                found.append(json.loads(text))
            except ValueError:
                return
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for line in ledger_lines.splitlines():
        if outside_attacker.MARKER in line:
            walk(json.loads(line))
    return found


def _candidate_folder(lab: Path, module: str) -> Path:
    """A copy of the attacker under its own module name, in a folder of its own."""
    folder = lab / f"cand_{module}"
    folder.mkdir()
    shutil.copy(ATTACKER, folder / f"{module}.py")
    return folder


REVIEW_PAIR = """
suite = "rtb"
track = "review"
trials_per_case = 1
concurrency = 1
order_seed = 1
[corpus]
builtin = "v0.1"
[track_options]
cases = ["backup_retention-*"]
[[candidates]]
name = "attacker-a"
kind = "inprocess"
entry = "atk_a:make_reviewer"
settings = { pair_role = "a", pair_word = "marmalade52" }
[[candidates]]
name = "attacker-b"
kind = "inprocess"
entry = "atk_b:make_reviewer"
settings = { pair_role = "b" }
"""

SEALED = """
suite = "rtb"
track = "review"
trials_per_case = 1
concurrency = 1
order_seed = 1
[corpus]
path = "SET"
[[candidates]]
name = "attacker-key"
kind = "inprocess"
entry = "atk_k:make_reviewer"
settings = { cheat_with_found_answers = true }
"""

CONTROL = """
suite = "rtb"
track = "control"
trials_per_case = 1
concurrency = 1
order_seed = 1
[corpus]
builtin = "v0.3"
[track_options]
paths = ["direct"]
[[candidates]]
name = "attacker-boundary"
kind = "inprocess"
entry = "atk_c:make_boundary"
"""

WORKFLOW = """
suite = "rtb"
track = "workflow"
trials_per_case = 1
concurrency = 1
order_seed = 1
[corpus]
builtin = "v0.3"
[track_options]
scenario_seed = 0
budget = { max_steps = 10, max_wall_s = 30.0 }
[[candidates]]
name = "attacker-agent"
kind = "inprocess"
entry = "atk_d:make_agent"
settings = { agent = "honest", boundary_entry = "atk_e:make_boundary" }
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    root = tmp_path_factory.mktemp("outside-attack")
    folders = [
        _candidate_folder(root, module)
        for module in ("atk_a", "atk_b", "atk_k", "atk_c", "atk_d", "atk_e", "atk_ta", "atk_tb")
    ]
    env = child_env(root, pythonpath=folders, extra={"TRUSTBENCH_CACHE": str(root / "cache")})
    lab = Lab(root, env)
    # The documented held-out workflow, done by the owner in the same folder as the operator's
    # runs: a key pair, a split (its held-out half in the clear), the sealed set, the exposure key.
    made = lab.cli("rtb", "keygen-seal", "--out", "owner.key")
    assert made.returncode == 0, made.stderr
    public = next(word for word in made.stdout.split() if word.startswith("tbx25519-public:"))
    for args in (
        ("rtb", "split", str(V03), "--out", "SPLIT", "--heldout-fraction", "0.05", "--seed", "7"),
        (
            "rtb",
            "seal",
            "SPLIT/heldout",
            "--recipient",
            public,
            "--out",
            "SET",
            "--budget",
            "50",
            "--force",
        ),
        ("rtb", "heldout", "exposure-key", "SET", "--key", "owner.key", "--out", "exposure.key"),
    ):
        done = lab.cli(*args)
        assert done.returncode == 0, done.stderr
    return lab


@pytest.fixture(scope="module")
def review_pair(lab: Lab) -> list[dict[str, Any]]:
    return lab.run(REVIEW_PAIR, "run_pair")


@pytest.fixture(scope="module")
def sealed(lab: Lab) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A run on the sealed set by a candidate that looks for the key and for labels in the clear,
    with the owner's key named in the environment (so the harness hides it)."""
    keys = {
        "TRUSTBENCH_HELDOUT_EXPOSURE_KEY": str(lab.root / "exposure.key"),
        "TRUSTBENCH_HELDOUT_KEY": str(lab.root / "owner.key"),
    }
    reports = lab.run(SEALED, "run_sealed", extra=keys)
    reported = lab.cli("report", "run_sealed", "--heldout-key", "owner.key", extra=keys)
    assert reported.returncode in {0, 1}, reported.stderr
    record = json.loads((lab.root / "run_sealed" / "record.json").read_text())
    return reports, record


@pytest.fixture(scope="module")
def control(lab: Lab) -> list[dict[str, Any]]:
    return lab.run(CONTROL, "run_control", "--limit", "2")


@pytest.fixture(scope="module")
def workflow(lab: Lab) -> list[dict[str, Any]]:
    return lab.run(WORKFLOW, "run_workflow", "--limit", "1")


def _channel(reports: list[dict[str, Any]], channel: str) -> set[str]:
    assert reports, "the attacker reported nothing (its findings never reached the ledger)"
    return {str(report["findings"][channel]) for report in reports if channel in report["findings"]}


def _blocked_everywhere(reports: list[dict[str, Any]], channel: str) -> None:
    outcomes = _channel(reports, channel)
    assert outcomes, f"channel {channel} was not probed"
    assert outcomes == {"b"}, f"{channel}: {sorted(outcomes)}"


@pytest.mark.parametrize("channel", _channels())
def test_reviewer_entry_reaches_nothing_through(
    review_pair: list[dict[str, Any]], channel: str
) -> None:
    _blocked_everywhere(review_pair, channel)


@pytest.mark.parametrize("channel", _channels(("remote_private_calls",)))
def test_control_boundary_entry_reaches_nothing_through(
    control: list[dict[str, Any]], channel: str
) -> None:
    _blocked_everywhere(control, channel)


@pytest.mark.parametrize("channel", _channels(("remote_private_calls",)))
def test_workflow_agent_reaches_nothing_through(
    workflow: list[dict[str, Any]], channel: str
) -> None:
    _blocked_everywhere(workflow, channel)


@pytest.mark.parametrize("channel", _channels())
def test_sealed_set_reviewer_reaches_nothing_through(
    sealed: tuple[list[dict[str, Any]], dict[str, Any]], channel: str
) -> None:
    _blocked_everywhere(sealed[0], channel)


def test_sealed_set_reviewer_never_finds_the_owner_key_on_the_same_machine(
    sealed: tuple[list[dict[str, Any]], dict[str, Any]],
) -> None:
    reports, _ = sealed
    assert {report["key_found"] for report in reports} == {False}


def _figure(record: dict[str, Any], candidate: str, name: str) -> tuple[int, int]:
    for figure in record["figures"][candidate]:
        if figure.get("name") == name:
            return int(figure["numerator"]), int(figure["denominator"])
    raise AssertionError(f"no {name} for {candidate}")


def test_sealed_set_reviewer_scores_at_chance(
    sealed: tuple[list[dict[str, Any]], dict[str, Any]],
) -> None:
    reports, record = sealed
    correct, trials = _figure(record, "attacker-key", "correct_decision_rate")
    assert not any(report["label_used"] for report in reports)
    assert correct < trials


def test_sealed_set_record_says_the_key_was_out_of_reach(
    sealed: tuple[list[dict[str, Any]], dict[str, Any]],
) -> None:
    assert sealed[1]["held_out_set"]["answer_key_available_to_candidate"] is False


def test_a_pair_of_reviewers_cannot_pass_state(review_pair: list[dict[str, Any]]) -> None:
    """SysV shm (and msg/sem), POSIX shm and an abstract socket between two sandboxed reviewers."""
    writers = [
        report["pair"] for report in review_pair if report["pair"].get("sysv_shm") == "written"
    ]
    readers = [
        report["pair"] for report in review_pair if report["pair"].get("sysv_shm") != "written"
    ]
    assert writers, "the first reviewer never wrote its segment: the attack did not run"
    assert readers
    for reader in readers:
        for channel in ("sysv_shm", "posix_shm", "abstract_socket"):
            assert "marmalade52" not in reader[channel], f"{channel} passed state: {reader}"


TRB_PAIR = """
suite = "trb"
track = "profile"
trials_per_case = 1
[corpus]
path = "trbc"
[track_options]
splits = ["eval"]
conformance_traces = 2
[[candidates]]
name = "adapter-a"
kind = "inprocess"
model = "atk_ta:make_adapter_a"
[[candidates]]
name = "adapter-b"
kind = "inprocess"
model = "atk_tb:make_adapter_b"
"""


def test_a_pair_of_trb_adapters_reaches_nothing_and_passes_no_state(lab: Lab) -> None:
    """Freeze runs each adapter through the conformance kit in its worker, the writer first:
    an adapter that reached any channel, or a reader that received the writer's word over SysV
    or POSIX shared memory, raises from `emit_r` with what it reached, and the freeze quotes it."""
    made = lab.cli("trb", "corpus", "trbc")
    assert made.returncode == 0, made.stderr
    (lab.root / "trb.toml").write_text(TRB_PAIR)
    frozen = lab.cli("freeze", "trb.toml", "--out", "run_trb")
    assert frozen.returncode == 0, frozen.stderr + frozen.stdout


def test_the_pair_channels_pass_state_outside_the_sandbox() -> None:
    """The control: the same code in one unconfined process passes the word every way."""
    word = f"control-{os.getpid()}"
    try:
        assert outside_attacker.sysv_write(word) == "written"
        assert outside_attacker.sysv_read() == word
        assert outside_attacker.abstract_listen(word) == "listening"
        assert outside_attacker.abstract_read() == word
    finally:
        outside_attacker.sysv_remove()
        outside_attacker.abstract_close()
