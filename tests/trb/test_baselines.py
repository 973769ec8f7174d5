from __future__ import annotations

import json

import pytest

from trustbench.trb.adapter import TRB_VERSION
from trustbench.trb.profile import RunConfig, run_reference
from trustbench.trb.profile._run import TRACKS, ProfileConfig, flags
from trustbench.trb.reference import TrainConfig
from trustbench.trb.reference._token_world import TokenLMConfig

TINY = RunConfig(
    sizes={"train": 150, "dev": 2, "eval": 10, "transfer": 6},  # one trace per family
    train=TrainConfig(epochs=10, hidden=16),
    resamples=200,
    profile=ProfileConfig(
        token_lm=TokenLMConfig(d_model=16, n_heads=2, epochs=1, finetune_epochs=1),
        lm_train_traces=100,
        grounding_fit_traces=20,
        viability_rollouts=1,
        navigation_samples=2,
    ),
)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRUSTBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "trb-cache"))
        return run_reference(TINY)


def test_profile_lists_the_five_baselines_each_run_with_every_track(result):
    keys = [b["baseline"] for b in result["baselines"]]
    assert keys == [
        "instruct", "cot-prompted", "cot-supervised-finetune",
        "trace-ai-ablation", "trace-ai-full",
    ]  # fmt: skip
    for b in result["baselines"]:
        assert b["status"] == "run"
        assert set(b["profile"]) == set(TRACKS)
        assert b["G"] is not None and b["slot_accuracy"]["goal"] is not None


def test_proxy_baselines_use_the_proxy_tier_and_the_reference_pair_the_native(result):
    tiers = {b["baseline"]: b["adapter_tier"] for b in result["baselines"]}
    rows = {(r["adapter"], r["adapter_tier"]) for r in result["rows"]}
    for key, tier in tiers.items():
        assert (key, tier) in rows
    assert tiers["instruct"] == "proxy" and tiers["trace-ai-full"] == "native"


def test_every_row_names_the_version_corpus_hash_and_tier(result):
    sha = result["corpus"]["sha256"]
    fields = {"trb_version", "corpus_sha256", "adapter", "adapter_tier", "split", "track",
              "metric", "value", "low", "high", "numerator", "denominator", "data"}  # fmt: skip
    tracks = set()
    for row in result["rows"]:
        assert fields <= set(row)
        assert row["trb_version"] == TRB_VERSION and row["corpus_sha256"] == sha
        tracks.add(row["track"])
    assert set(TRACKS) <= tracks


def test_every_track_reports_an_interval_not_a_bare_mean(result):
    for key in ("trace-ai-full", "instruct"):
        t = result["tracks"][key]
        figures = {f["name"]: f for f in t["figures"]}
        for track in ("grounding", "viability", "navigability"):
            assert t[track]["status"] == "measured", track
            assert figures[t[track]["figure"]]["intervals"], track


def _transfer_text(result, key):
    return result["tracks"][key]["transfer"]["per_track"]["governance"]["description"]


def test_tracks_2_to_6_are_the_track_measures_figures_and_vector(result):
    # One implementation: the reference run's Tracks 2, 4, 5 and 6 are the registered
    # measures' figures, and the headline is the profile vector's entry.
    for b in result["baselines"]:
        figures = {f["name"]: f for f in result["tracks"][b["baseline"]]["figures"]}
        for track in ("grounding", "viability", "navigability", "transfer"):
            entry = result["tracks"][b["baseline"]][track] if track != "transfer" else None
            head = b["profile"][track]
            if entry is not None:
                assert entry == head
            if head["status"] == "measured":
                assert figures[head["figure"]]["estimate"] == head["value"]


def test_native_encoder_cannot_read_a_longer_corridor_and_says_so(result):
    native = _transfer_text(result, "trace-ai-full")
    assert "transfer_length" in native and "encodes corridors of length 7" in native
    proxy = {f["name"]: f for f in result["tracks"]["instruct"]["figures"]}
    assert proxy["transfer_length.G_star"]["status"] == "measured"


def test_renamed_report_encoding_is_not_run_for_every_built_in_baseline_with_its_reason(result):
    why = {key: _transfer_text(result, key)
           for key in ("instruct", "cot-supervised-finetune", "trace-ai-full")}  # fmt: skip
    assert all("transfer_encoding" in text.split("; worst context")[0] for text in why.values())
    assert "native" in why["trace-ai-full"]
    assert "vocabulary lacks" in why["instruct"]  # a word-level LM has no such words
    g = result["tracks"]["instruct"]["transfer"]["per_track"]["governance"]
    assert g["min_context"] != "transfer_encoding"


def test_profile_plot_is_inline_svg_and_the_result_is_json(result):
    svg = result["profile"]["profile_svg"]
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    json.dumps(result)
    assert result["profile"]["synthetic_share"] == 1.0


def test_flags_catch_a_high_level_that_collapses_off_distribution():
    res = {
        "governance": {"null_edit_floor": {"G_minus_floor": {"estimate": 0.02, "low": -0.01}}},
    }
    heads = {t: {"value": 0.95} for t in ("governance", "grounding", "attribution")}
    heads |= {"viability": {"value": 0.9}, "navigability": {"value": 0.5}}
    trans = {"per_track": {"governance": {"drop_from_in_distribution": 0.3},
                           "grounding": {"drop_from_in_distribution": 0.01}}}  # fmt: skip
    got = flags(res, heads, trans)
    assert got["high_level_low_transfer"]["governance"] is True
    assert got["high_level_low_transfer"]["grounding"] is False
    assert got["high_level_low_transfer"]["viability"] is None  # no drop known, not "fine"
    assert got["g_at_or_below_null_edit_floor"] is True  # interval reaches 0
    assert got["viability_below_one"] is True


def test_library_profile_flags_g_star_near_zero_and_a_hidden_goal():
    from trustbench.trb.profile._vector import governance_star_flags

    nudge = {
        "G": {"value": 0.68},
        "G_star": {"value": 1e-5, "low": -1e-5, "high": 3e-5},
        "self_consistency": {"value": 0.7},
        "identity_edit_agreement": {"value": 1.0},
    }
    assert governance_star_flags(nudge)["g_star_near_zero"] is True
    hidden = {
        "G": {"value": 1.0},
        "G_star": {"value": 1.0, "low": 1.0, "high": 1.0},
        "self_consistency": {"value": 0.45},
        "identity_edit_agreement": {"value": 0.45},
    }
    got = governance_star_flags(hidden)
    assert got["g_star_near_zero"] is False and len(got["self_consistency"]) == 2


def test_g_star_near_zero_is_unknown_when_a_bound_is_missing():
    from trustbench.trb.profile._vector import governance_star_flags

    for star in ({"value": 0.5, "low": 0.2, "high": None}, {"value": 0.5, "low": None}):
        assert governance_star_flags({"G_star": star})["g_star_near_zero"] is None
    assert governance_star_flags({})["g_star_near_zero"] is None  # absent, never "fine"
