"""Track 6 in the `trb/profile` track: one transfer context per family, oracle-relative flags."""

from __future__ import annotations

from typing import Any

import pytest
from test_trb_profile_track import SIZES
from test_trb_track import freeze_run_report, write_spec

from trustbench.core.figures import Figure, Interval
from trustbench.trb.corpus._format import TRANSFER_FAMILY_SPLITS
from trustbench.trb.corpus._generate import (
    TRANSFER_FAMILIES,
    family_sizes,
    generate_reference_corpus,
    split_encodings,
)
from trustbench.trb.track._trace_measures import g_below_eval
from trustbench.trb.world import CorridorConfig

CANDIDATES = {
    "governed": "oracle:perfectly-governed",
    "full": "trace-ai-full",
    "in-distribution-only": "trb_broken_adapters:in_distribution_only",
    "obs0-cue": "trb_broken_adapters:first_observation_cue",
}


@pytest.fixture(scope="module")
def transfer_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("trb-transfer")
    spec = write_spec(
        folder,
        CANDIDATES,
        sizes=SIZES,  # the profile fixture's corpus and models: shared through the cache
        options='measures = ["governance", "transfer"]',
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRUSTBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "trb-cache"))
        return freeze_run_report(spec, folder / "run")


def _low_transfer(record: dict[str, Any], candidate: str) -> list[str]:
    return [
        f
        for f in record["trb"]["flags"]
        if f.startswith(f"{candidate}: high level with low transfer")
    ]


def test_builtin_corpus_holds_one_transfer_split_per_family_sharing_the_transfer_size() -> None:
    n = len(TRANSFER_FAMILIES)  # never hard-coded: families are added (spec §7: bump Y)
    corpus = generate_reference_corpus(
        {"train": 1, "dev": 0, "eval": 1, "transfer": n + 2}, transfer_families=True
    )
    assert "transfer" not in corpus
    sizes = {s: len(corpus[s]) for s in TRANSFER_FAMILY_SPLITS}
    assert list(sizes.values()) == [2, 2] + [1] * (n - 2)  # the first families get one more
    assert list(family_sizes(n + 2).values()) == list(sizes.values())
    worlds = {s: corpus[s][0].world for s in TRANSFER_FAMILY_SPLITS}
    assert worlds["transfer_wind"].gust_probability == 0.45
    assert worlds["transfer_start"].start_cells == (1, 2, 4, 5)
    assert worlds["transfer_door_prior"].door_closed_probability == 0.7
    assert worlds["transfer_length"].length == 9
    assert worlds["transfer_cue_delay"].cue_step == 2
    assert worlds["transfer_encoding"] == CorridorConfig()  # only the report encoding differs
    assert all(t.split == s for s in TRANSFER_FAMILY_SPLITS for t in corpus[s])


def test_track_six_takes_its_minimum_over_every_family_context(
    transfer_run: dict[str, Any],
) -> None:
    figures = {f["name"]: f for f in transfer_run["figures"]["governed"]}
    encoded = split_encodings(TRANSFER_FAMILY_SPLITS)  # proxy text: not for a native oracle
    for split in TRANSFER_FAMILY_SPLITS:
        want = "not_run" if split in encoded else "measured"
        assert figures[f"{split}.G_star"]["status"] == want, split
    worst = figures["transfer_min[G_star]"]
    assert worst["status"] == "measured"
    assert all(s in worst["description"] for s in TRANSFER_FAMILY_SPLITS)


def test_track_six_includes_the_cue_delay_context(transfer_run: dict[str, Any]) -> None:
    for candidate in ("governed", "full"):
        figures = {f["name"]: f for f in transfer_run["figures"][candidate]}
        assert figures["transfer_cue_delay.G_star"]["status"] == "measured", candidate
        assert "transfer_cue_delay" in figures["transfer_min[G_star]"]["description"]


def test_observation_zero_cue_cheat_shows_its_cue_delay_drop_and_is_flagged(
    transfer_run: dict[str, Any],
) -> None:
    figures = {f["name"]: f for f in transfer_run["figures"]["obs0-cue"]}
    assert figures["G_star"]["estimate"] > 0.99  # perfect in distribution
    assert figures["transfer_cue_delay.G_star"]["estimate"] < 0.2
    assert "worst context: transfer_cue_delay" in figures["transfer_min[G_star]"]["description"]
    assert figures["transfer_drop[G_star]"]["estimate"] > 0.8
    flags = _low_transfer(transfer_run, "obs0-cue")
    assert any("'transfer_cue_delay'" in f for f in flags), transfer_run["trb"]["flags"]


def test_length_family_is_not_applicable_for_the_reference_model_and_left_out_of_the_minimum(
    transfer_run: dict[str, Any],
) -> None:
    figures = {f["name"]: f for f in transfer_run["figures"]["full"]}
    assert figures["transfer_length.G_star"]["status"] == "not_run"
    worst = figures["transfer_min[G_star]"]
    assert worst["status"] == "measured"
    assert "'transfer_length'" in worst["description"].split("not measured on ")[1]
    assert (
        "transfer_length: not applicable: trace-ai-full encodes corridors" in worst["description"]
    )
    skipped = [f for f in transfer_run["trb"]["flags"] if f.startswith("full: ")]
    assert any("trial(s) not applicable, not scored" in f for f in skipped)


@pytest.mark.parametrize("candidate", ["full", "governed"])
def test_native_adapter_shows_the_encoding_context_not_applicable_and_track_six_names_why(
    transfer_run: dict[str, Any], candidate: str
) -> None:
    figures = {f["name"]: f for f in transfer_run["figures"][candidate]}
    there = figures["transfer_encoding.G_star"]
    assert there["status"] == "not_run" and there["estimate"] is None
    assert there["reason"].startswith("not applicable: ")
    assert "native adapter" in there["reason"] and "'renamed'" in there["reason"]
    worst = figures["transfer_min[G_star]"]
    assert worst["status"] == "measured"
    left_out = worst["description"].split("not measured on ")[1].split("]")[0]
    assert "'transfer_encoding'" in left_out
    assert "transfer_encoding: not applicable: " in worst["description"]
    assert not worst["description"].endswith("worst context: transfer_encoding")


def test_reference_full_model_does_not_trigger_the_transfer_flag_on_the_families(
    transfer_run: dict[str, Any],
) -> None:
    assert _low_transfer(transfer_run, "full") == []
    assert _low_transfer(transfer_run, "governed") == []


def test_adapter_governed_only_in_distribution_triggers_the_transfer_flag(
    transfer_run: dict[str, Any],
) -> None:
    flags = _low_transfer(transfer_run, "in-distribution-only")
    assert flags, transfer_run["trb"]["flags"]
    assert any("'transfer_start'" in f or "'transfer_length'" in f for f in flags)


def _g(name: str, value: float, low: float, high: float) -> Figure:
    interval = Interval(
        method="cluster_bootstrap_percentile", confidence=0.95, sidedness="two_sided",
        lower=low, upper=high, seed=0, resamples=10, groups=5,
    )  # fmt: skip
    return Figure(
        name=name, denominator=10, estimate=value, unit="trial", unit_count=5, cluster="trace",
        description="", intervals=[interval],
    )  # fmt: skip


def test_g_below_eval_flags_a_high_g_that_drops_beyond_the_governed_oracle_only() -> None:
    oracle = [_g("G", 1.0, 1.0, 1.0), _g("transfer_wind.G", 1.0, 1.0, 1.0)]
    drops = [_g("G", 0.95, 0.9, 1.0), _g("transfer_wind.G", 0.6, 0.5, 0.7)]
    assert g_below_eval("m", drops, oracle)
    # A low in-distribution G (the uniform oracle's ~0.5) is not "a high level that drops".
    low = [_g("G", 0.55, 0.5, 0.6), _g("transfer_wind.G", 0.3, 0.2, 0.4)]
    assert g_below_eval("m", low, oracle) == []
    # A context where the governed oracle drops as much is harder for everyone.
    hard = [_g("G", 1.0, 1.0, 1.0), _g("transfer_wind.G", 0.65, 0.6, 0.7)]
    assert g_below_eval("m", drops, hard) == []
