"""Reference native models: the governance gap the spec's central claim rests on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from trustbench.errors import CheckFailed
from trustbench.trb.adapter import check_adapter
from trustbench.trb.corpus import generate_reference_corpus, manifest_for
from trustbench.trb.corpus._format import TRANSFER_FAMILY_SPLITS
from trustbench.trb.profile import RunConfig
from trustbench.trb.profile import run_reference as _run_reference
from trustbench.trb.reference import (
    NativeModelAdapter,
    TrainConfig,
    cache_dir,
    load_reference_model,
    train_reference_model,
)

TINY = RunConfig(
    sizes={"train": 500, "dev": 10, "eval": 60, "transfer": 10},
    train=TrainConfig(epochs=50, hidden=32),
    resamples=500,
)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRUSTBENCH_CACHE", str(tmp_path_factory.mktemp("tiny-run-cache")))
        return _run_reference(TINY)


@pytest.mark.slow
def test_governance_gap_is_positive_with_an_interval_excluding_zero(tiny_run) -> None:
    gap = tiny_run["governance_gap"]
    assert gap["low"] > 0
    assert gap["sign_flip_p"] < 0.01
    assert (gap["method"], gap["seed"], gap["resamples"]) == (
        "trace-clustered percentile bootstrap", TINY.bootstrap_seed, TINY.resamples
    )  # fmt: skip


@pytest.mark.slow
def test_ablation_reports_accurately_but_its_report_does_not_govern(tiny_run) -> None:
    ablation = tiny_run["tracks"]["trace-ai-ablation"]["governance"]
    full = tiny_run["tracks"]["trace-ai-full"]["governance"]
    for slot in ("goal", "belief", "planned_next"):
        assert ablation["slot_accuracy"][slot]["value"] >= 0.95
    assert ablation["G"]["value"] < 0.75
    assert full["G"]["value"] > ablation["G"]["value"] + 0.15


@pytest.mark.slow
def test_every_result_row_carries_version_corpus_hash_and_tier(tiny_run) -> None:
    corpus = tiny_run["corpus"]["sha256"]
    assert tiny_run["rows"]
    for row in tiny_run["rows"]:
        assert row["trb_version"] == "TRB v1.0"
        assert row["corpus_sha256"] == corpus
        assert row["adapter_tier"] in {"native", "proxy"}
    json.dumps(tiny_run)


@pytest.mark.slow
def test_baselines_table_lists_all_five_and_marks_unrun_ones_not_run(tiny_run) -> None:
    table = {b["baseline"]: b for b in tiny_run["baselines"]}
    assert list(table) == [
        "instruct", "cot-prompted", "cot-supervised-finetune", "trace-ai-ablation",
        "trace-ai-full",
    ]  # fmt: skip
    for key in ("instruct", "cot-prompted", "cot-supervised-finetune"):
        assert table[key]["status"] == "not run"
        assert table[key]["G"] is None and table[key]["adapter_tier"] == "proxy"
    assert table["trace-ai-full"]["status"] == "run"


@pytest.mark.slow
def test_run_is_labelled_reference_world_not_a_trb_score(tiny_run) -> None:
    assert "not a TRB score" in tiny_run["label"]
    assert tiny_run["corpus"]["provenance"]["cap_status"] == "no_human_data"
    assert all(row["data"] == "reference_world" for row in tiny_run["rows"])
    assert all(check["passed"] for check in tiny_run["audit"])


@pytest.mark.slow
def test_library_reports_governance_per_transfer_family_and_the_minimum_with_its_drop(
    tiny_run,
) -> None:
    full = tiny_run["tracks"]["trace-ai-full"]
    transfer = full["transfer_governance"]
    assert set(transfer["contexts"]) == set(TRANSFER_FAMILY_SPLITS)  # 10 traces: every family
    ran = {s: c for s, c in transfer["contexts"].items() if c["status"] == "run"}
    # Left out with the reason, never a zero: a longer corridor and the renamed encoding.
    assert set(transfer["left_out"]) == {"transfer_length", "transfer_encoding"}
    assert "native adapter" in transfer["left_out"]["transfer_encoding"]
    assert all(transfer["contexts"][s]["G"] is None for s in transfer["left_out"])
    worst = min(ran, key=lambda s: ran[s]["G"]["value"])
    assert transfer["min_context"] == worst and transfer["G"] == ran[worst]["G"]
    eval_g = full["governance"]["G"]["value"]
    assert transfer["drop_from_eval"] == pytest.approx(eval_g - ran[worst]["G"]["value"])
    rows = [r for r in tiny_run["rows"] if r["adapter"] == "trace-ai-full"]
    assert {r["split"] for r in rows if r["metric"] == "G"} == {"eval", *ran}
    (minimum,) = [r for r in rows if r["metric"] == "min_over_contexts[G]"]
    assert minimum["min_context"] == worst and minimum["value"] == ran[worst]["G"]["value"]


@pytest.fixture(scope="module")
def small_corpus() -> tuple:
    splits = generate_reference_corpus({"train": 60, "dev": 4, "eval": 8, "transfer": 4}, seed=3)
    return splits, manifest_for(splits)


def test_training_is_reproducible_under_its_seed(small_corpus) -> None:
    splits, manifest = small_corpus
    config = TrainConfig(epochs=2, hidden=8)
    a, _ = train_reference_model(splits["train"], manifest, "full", config)
    b, _ = train_reference_model(splits["train"], manifest, "full", config)
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert torch.equal(pa, pb), name


def test_checkpoint_is_cached_and_loaded_by_name_with_its_sha256(small_corpus) -> None:
    splits, manifest = small_corpus
    config = TrainConfig(epochs=1, hidden=8)
    model, card = load_reference_model("trace-ai-full", splits["train"], manifest, config)
    again, card2 = load_reference_model("trace-ai-full", splits["train"], manifest, config)
    assert not card["loaded_from_cache"] and card2["loaded_from_cache"]
    assert card2["sha256"] == card["sha256"]
    assert (cache_dir() / card["checkpoint"]).exists()
    for pa, pb in zip(model.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(pa, pb)


def test_tampered_checkpoint_is_refused(small_corpus) -> None:
    splits, manifest = small_corpus
    config = TrainConfig(epochs=1, hidden=8, seed=5)
    _, card = load_reference_model("trace-ai-ablation", splits["train"], manifest, config)
    path = cache_dir() / card["checkpoint"]
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckFailed, match="differs from its card"):
        load_reference_model("trace-ai-ablation", splits["train"], manifest, config)


def test_cached_model_still_refuses_held_out_training_data(small_corpus) -> None:
    splits, manifest = small_corpus
    with pytest.raises(CheckFailed, match="held-out"):
        load_reference_model("trace-ai-full", splits["eval"], manifest, TrainConfig(epochs=1))


def test_native_adapter_passes_the_conformance_kit(small_corpus) -> None:
    splits, manifest = small_corpus
    model, _ = load_reference_model(
        "trace-ai-full", splits["train"], manifest, TrainConfig(epochs=1, hidden=8)
    )
    failures = [
        r for r in check_adapter(lambda: NativeModelAdapter(model, "full", 7, 6)) if not r.passed
    ]
    assert failures == []


def test_run_reads_a_stored_corpus_and_reports_its_hash(tmp_path: Path) -> None:
    from trustbench.trb.corpus import write_corpus

    splits = generate_reference_corpus({"train": 30, "dev": 2, "eval": 6, "transfer": 3}, seed=8)
    manifest = write_corpus(tmp_path, splits)
    result = _run_reference(
        RunConfig(train=TrainConfig(epochs=1, hidden=8), resamples=100), corpus_dir=tmp_path
    )
    assert result["corpus"]["sha256"] == manifest.corpus_sha256
    assert result["corpus"]["traces"] == {"train": 30, "dev": 2, "eval": 6, "transfer": 3}
    transfer = result["tracks"]["trace-ai-full"]["transfer_governance"]
    # An older folder's single `transfer` split is still the one transfer context.
    assert transfer["status"] == "run" and transfer["G"]["items"] == 3 * 6 * 4
    assert list(transfer["contexts"]) == ["transfer"] and transfer["min_context"] == "transfer"
