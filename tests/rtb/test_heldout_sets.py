"""Governed held-out sets (issue #33): sealing, the exposure log, retirement, reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.child_env import child_env

import trustbench
from trustbench.errors import InputError
from trustbench.rtb.corpus._load import builtin_corpus_root, load_corpus
from trustbench.rtb.heldout._crypto import KEY_ENV, new_key_pair
from trustbench.rtb.heldout._pipeline import (
    LOG_NAME,
    ExposureKey,
    exposure_summary,
    freeze_against,
    log_problems,
    owner_exposure_key,
    record_run,
)
from trustbench.rtb.heldout._seal import open_set, pin_problems, read_set_manifest, seal_corpus

FIXTURE = Path(__file__).parent / "fixtures" / "rtb_v0_2_user"


@pytest.fixture
def sealed(tmp_path: Path) -> tuple[Path, Path, str]:
    private, public = new_key_pair()
    key = tmp_path / "owner.key"
    key.write_text(private)
    folder = tmp_path / "set"
    seal_corpus(FIXTURE, public, folder, budget=2, set_id="hs-test", at="2026-12-01")
    return folder, key, private


def _exposure(folder: Path, private: str) -> ExposureKey:
    """The set's exposure key, as the evaluation operator holds it (no witness file)."""
    return owner_exposure_key(read_set_manifest(folder), private)


def _cli(
    tmp: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`trustbench rtb ARGS` in a child with no held-out key unless `env` gives one."""
    return subprocess.run(
        [sys.executable, "-m", "trustbench", "rtb", *args],
        capture_output=True, text=True, check=False, env=child_env(tmp, extra=env),
    )  # fmt: skip


def test_lookup_attack_on_sealed_folder_and_package_finds_no_label(
    sealed: tuple[Path, Path, str],
) -> None:
    folder, _, _ = sealed
    corpus = load_corpus(FIXTURE)
    files = [p for p in folder.rglob("*") if p.is_file()]
    package = [p for p in Path(trustbench.__file__).parent.rglob("*.json")]
    blob = b"\n".join(p.read_bytes() for p in files)
    for case in corpus.cases:
        expectations = case.model_dump(mode="json")["expectations"]
        # The attacker's keys into an answer key: the case id and its expectation block.
        assert case.case_id.encode() not in blob
        assert json.dumps(expectations).encode() not in blob
        assert b'"expectations"' not in blob and b"reference_decision" not in blob
    for input_path in (folder / "inputs").glob("*.json"):
        task = json.loads(input_path.read_text())["task"]
        # The package holds no case whose task matches, so no label can be looked up there.
        assert not [p for p in package if task in p.read_text(encoding="utf-8")]


def test_sealing_a_builtin_corpus_is_refused(tmp_path: Path) -> None:
    _, public = new_key_pair()
    with pytest.raises(InputError, match="installed package"):
        seal_corpus(builtin_corpus_root("0.2"), public, tmp_path / "s", budget=1)


def test_owner_key_opens_the_answer_key_and_wrong_key_fails(
    sealed: tuple[Path, Path, str], tmp_path: Path
) -> None:
    folder, _, private = sealed
    open_set(folder, private, tmp_path / "opened")
    assert (
        load_corpus(tmp_path / "opened" / "corpus").manifest_sha256
        == load_corpus(FIXTURE).manifest_sha256
    )
    other, _ = new_key_pair()
    with pytest.raises(InputError, match="wrong private key"):
        open_set(folder, other, tmp_path / "other")


def test_report_without_the_key_refuses_and_says_why(sealed: tuple[Path, Path, str]) -> None:
    folder, key, _ = sealed
    result = _cli(folder.parent, "heldout", "report", str(folder))
    assert result.returncode == 2 and "private key" in result.stderr
    assert "evaluated" not in result.stdout
    ok = _cli(folder.parent, "heldout", "report", str(folder), "--json", env={KEY_ENV: str(key)})
    assert ok.returncode == 0, ok.stderr
    summary = json.loads(ok.stdout)["held_out_set"]
    assert summary["case_count"] == 5 and summary["answer_key_available_to_candidate"] is False


def test_altered_clear_input_is_caught_by_the_pins(sealed: tuple[Path, Path, str]) -> None:
    folder, _, private = sealed
    victim = next((folder / "inputs").glob("*.json"))
    victim.write_text(victim.read_text().replace("a", "b", 1))
    assert pin_problems(folder, read_set_manifest(folder))
    with pytest.raises(InputError, match="altered"):
        open_set(folder, private, folder.parent / "o")


def test_runs_past_budget_need_a_reason_which_is_recorded_and_printed(
    sealed: tuple[Path, Path, str],
) -> None:
    folder, key, private = sealed
    manifest, exposure = read_set_manifest(folder), _exposure(folder, private)
    run = {"candidates": ["rev"], "trials": 1, "at": "t", "by": "me"}
    for experiment, code in (("e1", "c1"), ("e2", "c2")):
        record_run(folder, manifest, key=exposure, experiment=experiment,
                   candidate_code=[code], **run)  # fmt: skip
    with pytest.raises(InputError, match="budget 2"):
        record_run(folder, manifest, key=exposure, experiment="e3", candidate_code=["c1"], **run)
    record_run(folder, manifest, key=exposure, experiment="e3", candidate_code=["c1"],
               reason="fix", **run)  # fmt: skip
    report = _cli(folder.parent, "heldout", "report", str(folder), "--key", str(key))
    assert "held-out set hs-test: run 3 times (budget 2) by 2 distinct candidate code" in (
        report.stdout
    )
    assert "reason recorded: fix" in report.stdout and "OVER BUDGET" in report.stdout


def test_retired_set_says_so_in_the_verdict_line(sealed: tuple[Path, Path, str]) -> None:
    folder, key, _ = sealed
    retired = _cli(folder.parent, "retire", str(folder), "--reason", "cases published",
                   "--key", str(key))  # fmt: skip
    assert retired.returncode == 0, retired.stderr
    report = _cli(folder.parent, "heldout", "report", str(folder), "--key", str(key), "--json")
    assert json.loads(report.stdout)["held_out_set"]["retired_reason"] == "cases published"
    text = _cli(folder.parent, "heldout", "report", str(folder), "--key", str(key)).stdout
    assert text.splitlines()[0].startswith("VERDICT: RETIRED (exposed: cases published)")


def test_exposure_count_survives_a_killed_run(sealed: tuple[Path, Path, str]) -> None:
    folder, _, private = sealed
    code = (
        "import os, sys; from pathlib import Path;"
        "from trustbench.rtb.heldout._pipeline import owner_exposure_key, record_run;"
        "from trustbench.rtb.heldout._seal import read_set_manifest;"
        f"f = Path({str(folder)!r}); m = read_set_manifest(f);"
        f"k = owner_exposure_key(m, {private!r});"
        "record_run(f, m, key=k, experiment='e', candidates=['r'], candidate_code=['c'],"
        " trials=1, at='t', by='me');"
        "os.kill(os.getpid(), 9)"
    )
    killed = subprocess.run([sys.executable, "-c", code], check=False, env=child_env(folder.parent))
    assert killed.returncode == -9
    manifest = read_set_manifest(folder)
    assert exposure_summary(folder, manifest)["runs"] == 1
    assert log_problems(folder, manifest, _exposure(folder, private)) == []


@pytest.mark.parametrize("attack", ["edit", "drop", "truncate"])
def test_tampered_exposure_log_is_detected_by_verify(
    sealed: tuple[Path, Path, str], attack: str
) -> None:
    folder, _, private = sealed
    manifest, exposure = read_set_manifest(folder), _exposure(folder, private)
    for _ in range(2):
        freeze_against(folder, manifest, key=exposure, candidates=["rev"], trials=1, at="t",
                       by="me")  # fmt: skip
    log = folder / LOG_NAME
    lines = log.read_text().splitlines()
    if attack == "edit":
        lines[0] = lines[0].replace('"trials":1', '"trials":0')
    elif attack == "drop":
        lines = lines[1:]
    else:
        lines = lines[:1]
    log.write_text("".join(line + "\n" for line in lines))
    result = _cli(folder.parent, "heldout", "verify", str(folder))
    assert result.returncode != 0 and "problem" in result.stderr
    assert exposure_summary(folder, manifest)["log_problems"]
