"""Delta_gov over training seeds through the harness: seed replica candidates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_trb_track import figure, freeze_run_report, write_spec

from trustbench.core import CandidateSpec
from trustbench.errors import InputError
from trustbench.trb.track._adapters import adapter_id

SEED_CANDIDATES = {
    "full": "trace-ai-full",
    "ablation": "trace-ai-ablation",
    **{f"full-s{k}": f"trace-ai-full@seed={k}" for k in (1, 2)},
    **{f"ablation-s{k}": f"trace-ai-ablation@seed={k}" for k in (1, 2)},
}
SMALL = """
splits = ["eval"]
measures = ["governance", "attribution", "grounding"]
grounding_fit_traces = 20
"""


def _run(folder: Path, candidates: dict[str, str], base: Path) -> dict[str, Any]:
    spec = write_spec(
        folder, candidates, sizes="{ train = 120, eval = 10, transfer = 1 }", options=SMALL
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRUSTBENCH_CACHE", str(base / "trb-cache"))
        return freeze_run_report(spec, folder / "run")


@pytest.fixture(scope="module")
def seed_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run(tmp_path_factory.mktemp("seeds"), SEED_CANDIDATES, tmp_path_factory.getbasetemp())


def test_seed_replicas_give_delta_gov_a_seed_and_trace_interval_beside_the_single_seed_one(
    seed_run: dict[str, Any],
) -> None:
    seeds = seed_run["trb"]["governance_gap"]["seeds"]
    assert seeds["status"] == "run"
    assert seeds["seeds"] == [0, 1, 2]
    assert seeds["full"] == ["full", "full-s1", "full-s2"]
    single = figure(seed_run, "full", "governance_gap")
    over_seeds = figure(seed_run, "full", "governance_gap_seeds")
    assert single["status"] == over_seeds["status"] == "measured"
    (interval,) = over_seeds["intervals"]
    assert interval["method"] == "seed_and_trace_bootstrap_percentile"
    assert interval["lower"] <= over_seeds["estimate"] <= interval["upper"]


def test_seed_replicas_skip_the_costly_tracks_and_say_why(seed_run: dict[str, Any]) -> None:
    replica = figure(seed_run, "full-s1", "detection_auc")
    assert replica["status"] != "measured"
    assert "seed replica" in (replica.get("reason") or "")
    assert figure(seed_run, "full", "detection_auc")["status"] == "measured"
    assert figure(seed_run, "full-s1", "G")["status"] == "measured"


def test_a_run_without_replicas_says_delta_gov_rests_on_one_seed(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    record = _run(
        tmp_path_factory.mktemp("one-seed"),
        {"full": "trace-ai-full", "ablation": "trace-ai-ablation"},
        tmp_path_factory.getbasetemp(),
    )
    seeds = record["trb"]["governance_gap"]["seeds"]
    assert seeds["status"] == "not run"
    assert "one training seed" in seeds["reason"]
    assert not [f for f in record["figures"]["full"] if f["name"] == "governance_gap_seeds"]


@pytest.mark.parametrize("model", ["trace-ai-full@seed=x", "oracle:uniform@seed=1"])
def test_a_malformed_seed_replica_id_is_refused_naming_the_candidate(model: str) -> None:
    with pytest.raises(InputError, match="seed replica") as caught:
        adapter_id(CandidateSpec(name="c", kind="inprocess", model=model))
    assert "candidate c" in str(caught.value)


def test_the_record_keeps_each_seeds_own_delta_gov_beside_the_pooled_one(
    seed_run: dict[str, Any],
) -> None:
    seeds = seed_run["trb"]["governance_gap"]["seeds"]
    per_seed = seeds["per_seed"]
    assert [p["seed"] for p in per_seed] == [0, 1, 2]
    for entry in per_seed:
        assert entry["interval"]["lower"] <= entry["estimate"] <= entry["interval"]["upper"]
        assert entry["pass_bar_met"] == (entry["interval"]["lower"] > 0)
    assert seeds["every_seed_above_0"] == all(p["pass_bar_met"] for p in per_seed)
    pooled = sum(p["estimate"] for p in per_seed) / len(per_seed)
    assert pooled == pytest.approx(seeds["estimate"], abs=1e-9)
