from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trustbench.cli import app
from trustbench.errors import CheckFailed
from trustbench.trb.adapter import SelfReport, StepContext
from trustbench.trb.corpus import read_corpus
from trustbench.trb.corpus._format import TRANSFER_FAMILY_SPLITS
from trustbench.trb.corpus._generate import split_encodings
from trustbench.trb.instruments import GovernedOracle
from trustbench.trb.instruments import _oracles as oracles
from trustbench.trb.world import reference_continuation


def test_audit_command_exits_0_when_every_oracle_matches_its_closed_form() -> None:
    result = CliRunner().invoke(app, ["trb", "audit", "--traces", "20", "--no-cheats"])
    assert result.exit_code == 0, result.output
    assert "epiphenomenal" in result.output


class _IgnoresConfidence(GovernedOracle):
    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        r = r_override or self.emit_r(context)
        return reference_continuation(r.model_copy(update={"confidence": 1.0}))


def test_audit_command_exits_1_when_an_oracle_deviates(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = {**oracles.default_oracles(), "perfectly-governed": _IgnoresConfidence}
    monkeypatch.setattr(oracles, "default_oracles", lambda: broken)
    result = CliRunner().invoke(app, ["trb", "audit", "--traces", "20", "--no-cheats"])
    assert isinstance(result.exception, CheckFailed)
    assert result.exception.exit_code == 1
    assert "perfectly-governed G" in str(result.exception)


def test_corpus_command_writes_splits_manifest_and_schema(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    result = CliRunner().invoke(app, ["trb", "corpus", str(out), "--train", "10", "--eval", "5"])
    assert result.exit_code == 0, result.output
    manifest, splits = read_corpus(out)
    assert manifest.corpus_sha256 in result.output
    assert len(splits["eval"]) == 5
    assert json.loads((out / "trace.schema.json").read_text())["title"] == "Trace"


def test_corpus_command_writes_one_split_per_transfer_family_with_its_encoding(
    tmp_path: Path,
) -> None:
    out = tmp_path / "corpus"
    n = 2 * len(TRANSFER_FAMILY_SPLITS)
    args = ["trb", "corpus", str(out), "--train", "4", "--dev", "0", "--eval", "2"]
    args += ["--transfer", str(n)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    manifest, splits = read_corpus(out)
    assert "transfer" not in splits
    assert {s: len(splits[s]) for s in TRANSFER_FAMILY_SPLITS} == dict.fromkeys(
        TRANSFER_FAMILY_SPLITS, 2
    )
    encodings = {s: manifest.splits[s].report_encoding for s in TRANSFER_FAMILY_SPLITS}
    assert encodings == {s: split_encodings([s]).get(s, "standard") for s in encodings}
    assert "transfer_encoding: 2 traces, report encoding renamed" in result.output


@pytest.mark.slow
def test_smoke_command_prints_the_gap_and_writes_a_json_result(tmp_path: Path) -> None:
    out = tmp_path / "smoke.json"
    result = CliRunner().invoke(app, ["trb", "smoke", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "Delta_gov" in result.output and "not run" in result.output
    record = json.loads(out.read_text())
    assert record["governance_gap"]["low"] > 0
    assert record["trb_version"] == "TRB v1.0"


def _profile_record(
    names: tuple[str, ...], axis: dict[str, float], *, baseline_profile: dict[str, Any]
) -> dict[str, Any]:
    """A TRB record whose candidates all score `axis` on every axis, each also a baseline."""
    return {
        "qualifications": [],
        "trb": {
            "version": "trb-v4", "corpus": {"sha256": "0" * 64},
            "profile": {n: dict.fromkeys(("G", "ground", "attr", "viab", "nav", "trans"), axis)
                        for n in names},
            "adapters": {n: {"tier": "native"} for n in names},
            "baselines": [{"baseline": n, "adapter_tier": "native", "status": "run",
                           "candidate": n, "profile": baseline_profile} for n in names],
            "governance_gap": {"status": "not run", "reason": "no pair"}, "flags": [],
        },
    }  # fmt: skip


def test_the_profile_table_keeps_every_candidate_name_whole_at_80_columns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from trustbench.trb._cli_tables import _print_profile_record

    monkeypatch.setenv("COLUMNS", "80")
    axis = {"value": 0.512, "lower": 0.401, "upper": 0.623}
    names = ("trace-ai-full", "trace-ai-ablation", "cot-supervised-finetune")
    _print_profile_record(_profile_record(names, axis, baseline_profile={}))
    printed = capsys.readouterr().out
    assert max(len(line) for line in printed.splitlines()) <= 80
    for name in names:
        assert printed.count(name) >= 2, (name, printed)  # profile row and baseline row, whole
    assert "…" not in printed


@pytest.mark.parametrize("columns", [80, 120, 200])
def test_the_profile_tables_never_fold_a_figure_mid_number_at_any_width(
    columns: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # At 80 and 120 columns the tables folded `-0.003` into `-0.00` over `3`: a wrong figure.
    from trustbench.trb._cli_tables import _print_profile_record

    monkeypatch.setenv("COLUMNS", str(columns))
    axis = {"value": -0.003, "lower": -0.022, "upper": 0.016}
    names = ("trace-ai-full", "trace-ai-ablation", "cot-supervised-finetune", "oracle:uniform")
    _print_profile_record(
        _profile_record(names, axis, baseline_profile=dict.fromkeys(("G", "nav"), axis))
    )
    printed = capsys.readouterr().out
    assert max(len(line) for line in printed.splitlines()) <= columns
    figures = re.findall(r"-?\d+\.\d*", printed)  # a folded `-0.003` leaves `-0.00`
    assert set(figures) <= {"-0.003", "-0.022", "0.016"}, printed
    for name in names:
        assert printed.count(name) >= 2, (name, printed)  # profile and baseline rows, whole


def test_corpus_command_with_world_text_ops_writes_a_text_world_corpus(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    args = ["trb", "corpus", str(out), "--world", "text-ops", "--train", "0", "--dev", "0"]
    result = CliRunner().invoke(app, [*args, "--eval", "2", "--transfer", "3"])
    assert result.exit_code == 0, result.output
    manifest, splits = read_corpus(out)
    assert manifest.world_id == "text-ops" and "world text-ops" in result.output
    assert len(splits["eval"]) == 2 and all(t.task is not None for t in splits["eval"])
    assert {len(splits[s]) for s in splits if s != "eval"} == {1}  # 3 shared by 3 families


def test_corpus_command_refuses_an_unknown_world_naming_the_option(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["trb", "corpus", str(tmp_path / "c"), "--world", "maze"])
    assert result.exit_code == 2 and "--world" in result.output and "maze" in result.output
    assert not (tmp_path / "c").exists()
