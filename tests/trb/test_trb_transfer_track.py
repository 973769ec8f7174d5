"""Track 6 in the `trb/profile` track: one transfer context per family, oracle-relative flags."""

from __future__ import annotations

from typing import Any

import pytest
from test_trb_profile_track import SIZES
from test_trb_track import freeze_run_report, write_spec

from trustbench.core.figures import Figure, Interval
from trustbench.trb.corpus._format import TRANSFER_FAMILY_SPLITS
from trustbench.trb.corpus._generate import family_sizes, generate_reference_corpus
from trustbench.trb.track._transfer_flags import g_below_eval

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
    corpus = generate_reference_corpus(
        {"train": 1, "dev": 0, "eval": 1, "transfer": 7}, transfer_families=True
    )
    assert "transfer" not in corpus
    assert {s: len(corpus[s]) for s in TRANSFER_FAMILY_SPLITS} == {
        "transfer_wind": 2, "transfer_start": 2, "transfer_door_prior": 1, "transfer_length": 1,
        "transfer_cue_delay": 1,
    }  # fmt: skip
    assert family_sizes(7) == {"wind": 2, "start": 2, "door_prior": 1, "length": 1, "cue_delay": 1}
    worlds = {s: corpus[s][0].world for s in TRANSFER_FAMILY_SPLITS}
    assert worlds["transfer_wind"].gust_probability == 0.45
    assert worlds["transfer_start"].start_cells == (1, 2, 4, 5)
    assert worlds["transfer_door_prior"].door_closed_probability == 0.7
    assert worlds["transfer_length"].length == 9
    assert worlds["transfer_cue_delay"].cue_step == 2
    assert all(t.split == s for s in TRANSFER_FAMILY_SPLITS for t in corpus[s])


def test_track_six_takes_its_minimum_over_every_family_context(
    transfer_run: dict[str, Any],
) -> None:
    figures = {f["name"]: f for f in transfer_run["figures"]["governed"]}
    for split in TRANSFER_FAMILY_SPLITS:
        assert figures[f"{split}.G_star"]["status"] == "measured", split
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
    assert "not measured on ['transfer_length'], left out" in worst["description"]
    skipped = [f for f in transfer_run["trb"]["flags"] if f.startswith("full: ")]
    assert any("not applicable" in f and "transfer_length" in f for f in skipped)


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
