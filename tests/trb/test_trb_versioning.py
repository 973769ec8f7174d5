"""Versioning (spec §7): a metric-definition digest beside `trb_version`; no cross-digest use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import invoke
from trb_outside_measure import SecondGovernance

from trustbench.errors import InputError
from trustbench.trb.track._measures import GOVERNANCE, load_measures
from trustbench.trb.track._versioning import (
    compare_records,
    default_metric_digest,
    metric_digest,
    refuse_cross_version,
)

SIX = ("governance", "grounding", "attribution", "viability", "navigability", "transfer")


def _record(digest: str | None, version: str = "TRB v0.2", g_star: float = 0.8) -> dict[str, Any]:
    row = {"candidate": "full", "split": "eval", "metric": "G_star", "estimate": g_star}
    return {"trb": {"version": version, "metric_digest": digest, "rows": [row]}}


def test_the_digest_names_the_measures_code_and_headline_parameters() -> None:
    six = [m for m, _ in load_measures(SIX)]
    assert metric_digest(six) == default_metric_digest()  # stable across calls
    assert metric_digest(six).startswith("sha256:")
    # Another measure class on the G axis (code from another module): another definition.
    assert metric_digest([SecondGovernance(), *six[1:]]) != metric_digest(six)
    # Fewer measures: other headlines declared.
    assert metric_digest([GOVERNANCE]) != metric_digest(six)


def test_results_under_one_version_and_digest_compare_row_by_row() -> None:
    paired = compare_records(
        _record("sha256:aa"), _record("sha256:aa", g_star=0.7), a_name="a", b_name="b"
    )
    assert paired == [
        {"candidate": "full", "split": "eval", "metric": "G_star", "a": 0.8, "b": 0.7}
    ]


@pytest.mark.parametrize(
    ("second", "what"),
    [
        (_record("sha256:bb"), "metric-definition digests"),
        (_record("sha256:aa", version="TRB v0.3"), "TRB versions"),
        (_record(None), "metric-definition digests"),  # a result written before digests
    ],
)
def test_a_comparison_across_versions_or_digests_is_refused_naming_both(
    second: dict[str, Any], what: str
) -> None:
    with pytest.raises(InputError) as refused:
        compare_records(_record("sha256:aa"), second, a_name="run-a", b_name="run-b")
    message = str(refused.value)
    assert what in message and "run-a" in message and "run-b" in message
    assert "sha256:aa" in message
    assert (second["trb"]["metric_digest"] or "no metric digest") in message


def test_two_undigested_results_are_not_comparable_either() -> None:
    with pytest.raises(InputError):
        refuse_cross_version({"trb_version": "TRB v0.2"}, {"trb_version": "TRB v0.2"},
                             a_name="a", b_name="b")  # fmt: skip


def test_trb_compare_prints_headlines_and_exits_2_across_digests(tmp_path: Path) -> None:
    same, other = tmp_path / "same.json", tmp_path / "other.json"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "record.json").write_text(json.dumps(_record("sha256:aa")))
    same.write_text(json.dumps(_record("sha256:aa", g_star=0.5)))
    other.write_text(json.dumps(_record("sha256:bb")))
    code, out = invoke("trb", "compare", str(tmp_path / "run"), str(same))
    assert code == 0, out
    assert "full  G_star: 0.800 vs 0.500" in out
    code, message = invoke("trb", "compare", str(tmp_path / "run"), str(other))
    assert code == 2
    assert "sha256:aa" in message and "sha256:bb" in message
    code, message = invoke("trb", "compare", str(tmp_path / "missing.json"), str(same))
    assert code == 2 and "missing.json" in message
