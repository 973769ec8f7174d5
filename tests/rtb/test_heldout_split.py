"""`rtb split` keeps related cases on one side; `rtb seal` refuses public cases (issue 52)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trustbench.errors import InputError
from trustbench.rtb.corpus._load import builtin_corpus_root, load_corpus, write_manifest
from trustbench.rtb.heldout._crypto import new_key_pair
from trustbench.rtb.heldout._pipeline import exposure_summary, verdict_line
from trustbench.rtb.heldout._seal import read_set_manifest, seal_corpus
from trustbench.rtb.heldout._split import SPLIT_RECORD, allocation_units, split_corpus


def test_split_keeps_every_domain_group_on_one_side_seeded_and_recorded(tmp_path: Path) -> None:
    starter = builtin_corpus_root("0.1")
    record = split_corpus(starter, tmp_path / "a", heldout_fraction=0.3, seed=11)
    sides = {side: load_corpus(tmp_path / "a" / side).cases for side in ("development", "heldout")}
    groups = {side: {case.group for case in cases} for side, cases in sides.items()}
    assert groups["development"].isdisjoint(groups["heldout"])
    assert len(sides["development"]) + len(sides["heldout"]) == 60
    assert len(sides["heldout"]) == record["heldout"]["cases"] >= 18  # 30 %, whole groups of 6
    written = json.loads((tmp_path / "a" / SPLIT_RECORD).read_text())
    assert written == record and written["seed"] == 11
    assert written["corpus_manifest_sha256"] == load_corpus(starter).manifest_sha256
    # The same seed allocates the same way; the record is the allocation.
    again = split_corpus(starter, tmp_path / "b", heldout_fraction=0.3, seed=11)
    assert again["units"] == record["units"]


def test_a_contrast_family_spanning_two_groups_joins_them_in_one_unit() -> None:
    cases = [
        {"case_id": "a1", "group": "dns"},
        {"case_id": "a2", "group": "dns", "contrast_family": "f"},
        {"case_id": "b1", "group": "vm", "contrast_family": "f"},
        {"case_id": "b2", "group": "vm"},
        {"case_id": "c1", "group": "gpu"},
    ]
    assert allocation_units(cases) == [["a1", "a2", "b1", "b2"], ["c1"]]


def test_split_refuses_a_fraction_out_of_range(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="between 0 and 1"):
        split_corpus(builtin_corpus_root("0.1"), tmp_path / "s", heldout_fraction=1.0, seed=0)


def test_seal_refuses_the_public_starter_with_a_suffix_added_to_each_task(
    tmp_path: Path,
) -> None:
    copy = tmp_path / "starter"
    shutil.copytree(builtin_corpus_root("0.1"), copy)
    for path in (copy / "cases").glob("*.json"):
        case = json.loads(path.read_text())
        case["task"] += " Reviewed for the quarterly audit."
        path.write_text(json.dumps(case, indent=2), encoding="utf-8")
    write_manifest(copy)
    _, public = new_key_pair()
    with pytest.raises(InputError, match="60 case\\(s\\) match a shipped public corpus"):
        seal_corpus(copy, public, tmp_path / "set", budget=1)
    assert not (tmp_path / "set").exists()
    # Forced, the set says so in every report's verdict line.
    seal_corpus(copy, public, tmp_path / "set", budget=1, force=True)
    manifest = read_set_manifest(tmp_path / "set")
    assert len(manifest["public_matches"]) == 60
    assert {"corpus": "v0.1", "public_case": "backup_retention-01-permitted"} in (
        manifest["public_matches"]
    )
    summary = exposure_summary(tmp_path / "set", manifest)
    assert "60 cases MATCH A PUBLIC CORPUS" in verdict_line(summary)
