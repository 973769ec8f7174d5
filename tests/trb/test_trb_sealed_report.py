"""A TRB run over a sealed transfer split: the candidate's report in the run folder, the
owner's report only with the collector's key, elsewhere (issue 54, deliverable 5).

One run of the imported fixture (`transfer_wind`, "Harbor Lab", sealed) serves every test:
the owner's report is written into each test's own folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.support.cli import invoke
from tests.trb.test_trb_import import SPEC, _sealed_corpus

from trustbench.rtb.heldout._crypto import new_key_pair
from trustbench.trb.track import freeze_run_report

SEALED_TRACE = b"harbor-017"
"""The sealed split's one trace id (the fixture's `transfer_wind` session)."""
SEALED_DETAIL = (SEALED_TRACE, b'"r_override":', b"gust_probability")
"""Bytes only a per-trial row of the sealed split carries: its trace id, the r' overrides sent
to the adapter, and the trace's own world (its context)."""
REPORT_FILES = ("report.html", "record.json", "record.trials.jsonl")


@dataclass(frozen=True)
class SealedRun:
    """A finished run over the sealed split, and the collector's key file."""

    run: Path
    key_file: Path


@pytest.fixture(scope="module")
def sealed_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SealedRun]:
    tmp_path = tmp_path_factory.mktemp("sealed-run")
    _, private = _sealed_corpus(tmp_path)
    key_file = tmp_path / "harbor.key"
    key_file.write_text(private)
    (tmp_path / "spec.toml").write_text(SPEC)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TRUSTBENCH_HELDOUT_KEY", str(key_file))
        freeze_run_report(tmp_path / "spec.toml", tmp_path / "run")
    yield SealedRun(run=tmp_path / "run", key_file=key_file)


def _report_bytes(folder: Path) -> bytes:
    return b"".join((folder / name).read_bytes() for name in REPORT_FILES)


def test_the_run_folders_report_holds_no_trace_context_or_row_of_the_sealed_split(
    sealed_run: SealedRun,
) -> None:
    scanned = _report_bytes(sealed_run.run)
    assert [detail for detail in SEALED_DETAIL if detail in scanned] == []
    assert (sealed_run.run / "record.trials.jsonl").read_bytes() == b""


def test_the_candidates_report_keeps_the_sealed_splits_figures_and_says_what_was_withheld(
    sealed_run: SealedRun,
) -> None:
    record = json.loads((sealed_run.run / "record.json").read_text())
    wind = record["trb"]["corpus"]["transfer_contexts"]["transfer_wind"]
    assert wind["held_out_report"] == "candidate"
    assert "trace id" in wind["withheld"] and "r' value" in wind["withheld"]
    splits = {row["split"] for row in record["trb"]["rows"] if row["status"] == "measured"}
    assert "transfer_wind" in splits  # its figures and intervals stay, aggregated
    page = (sealed_run.run / "report.html").read_text()
    assert "Held-out set: what was withheld and why" in page
    assert "trustbench trb sealed-report --split transfer_wind" in page
    # The oracle ran in the harness process, where the collector's key opened the split.
    assert "answer key available to the candidate&#39;s side: YES" in page


def test_the_owners_report_holds_the_sealed_traces_and_leaves_the_run_folder_as_it_was(
    sealed_run: SealedRun, tmp_path: Path
) -> None:
    before = _report_bytes(sealed_run.run)
    code, output = invoke(
        "trb", "sealed-report", "--split", "transfer_wind", "--key", str(sealed_run.key_file),
        "--run", str(sealed_run.run), "--out", str(tmp_path / "owner"),
    )  # fmt: skip
    assert code == 0, output
    assert "wrote the owner's report" in output
    owner = _report_bytes(tmp_path / "owner")
    assert [detail for detail in SEALED_DETAIL if detail not in owner] == []
    record = json.loads((tmp_path / "owner" / "record.json").read_text())
    assert record["trb"]["corpus"]["transfer_contexts"]["transfer_wind"]["held_out_report"] == (
        "owner"
    )
    rows = [json.loads(line) for line in (tmp_path / "owner" / "record.trials.jsonl").open()]
    assert [row["trace_id"] for row in rows] == ["harbor-017"]
    assert rows[0]["trace"]["steps"] and rows[0]["hooks"]  # its contexts and what was sent
    assert _report_bytes(sealed_run.run) == before


def test_the_owners_report_is_refused_without_the_collectors_key(
    sealed_run: SealedRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRUSTBENCH_HELDOUT_KEY", raising=False)
    code, message = invoke(
        "trb", "sealed-report", "--split", "transfer_wind", "--run", str(sealed_run.run),
        "--out", str(tmp_path / "owner"),
    )  # fmt: skip
    assert code == 2
    assert "needs that private key (--key FILE or $TRUSTBENCH_HELDOUT_KEY)" in message
    assert "split 'transfer_wind'" in message and "Traceback" not in message
    assert not (tmp_path / "owner").exists()


def test_the_owners_report_is_refused_with_another_key(
    sealed_run: SealedRun, tmp_path: Path
) -> None:
    other = tmp_path / "other.key"
    other.write_text(new_key_pair()[0])
    code, message = invoke(
        "trb", "sealed-report", "--split", "transfer_wind", "--key", str(other),
        "--run", str(sealed_run.run), "--out", str(tmp_path / "owner"),
    )  # fmt: skip
    assert code == 2 and "wrong private key" in message
    assert not (tmp_path / "owner").exists()


def test_the_owners_report_is_never_written_inside_the_run_folder(
    sealed_run: SealedRun,
) -> None:
    code, message = invoke(
        "trb", "sealed-report", "--split", "transfer_wind", "--key", str(sealed_run.key_file),
        "--run", str(sealed_run.run), "--out", str(sealed_run.run / "owner"),
    )  # fmt: skip
    assert code == 2 and "--out lies inside the run folder" in message
    assert not (sealed_run.run / "owner").exists()
