from __future__ import annotations

import time

import numpy as np
import pytest

from trustbench.errors import InputError
from trustbench.trb.corpus import generate_reference_corpus, manifest_for
from trustbench.trb.measures import ReferenceWhiteBox
from trustbench.trb.measures._governance import governance_rows, seed_trace_gap_figure
from trustbench.trb.reference import TrainConfig, load_reference_seeds

SEEDS = [0, 1, 2, 3, 4]


@pytest.fixture(scope="module")
def per_seed_tv():
    """Summed TV per (seed, eval trace) for five full and five ablation reference models."""
    splits = generate_reference_corpus({"train": 100, "dev": 2, "eval": 16, "transfer": 2})
    manifest = manifest_for(splits)
    config = TrainConfig(epochs=12, hidden=16)
    fit = [splits["train"][0].context(0)]
    out, started = {}, time.perf_counter()
    for name in ("trace-ai-full", "trace-ai-ablation"):
        models = load_reference_seeds(name, splits["train"], manifest, config, SEEDS)
        rows = [
            governance_rows(ReferenceWhiteBox(m, name, 7, 6, fit), splits["eval"])
            for m, _ in models
        ]
        out[name] = np.array([[r["tv_sum"] for r in seed_rows] for seed_rows in rows])
        out["n"] = np.array([r["n_items"] for r in rows[0]])
        out[f"{name}:cards"] = [card for _, card in models]
    out["seconds"] = time.perf_counter() - started
    return out


def test_governance_gap_seed_and_trace_interval_excludes_zero_for_the_reference_pair(
    per_seed_tv,
):
    figure = seed_trace_gap_figure(
        per_seed_tv["trace-ai-full"],
        per_seed_tv["trace-ai-ablation"],
        per_seed_tv["n"],
        seed=3,
        resamples=1000,
        description="five seed pairs",
    )
    interval = figure.intervals[0]
    assert interval.method == "seed_and_trace_bootstrap_percentile"
    assert interval.not_computable is None
    assert 0 < interval.lower < figure.estimate < interval.upper


def test_each_seed_is_its_own_cached_model(per_seed_tv):
    cards = per_seed_tv["trace-ai-full:cards"]
    assert [c["training"]["config"]["seed"] for c in cards] == SEEDS
    assert len({c["sha256"] for c in cards}) == len(SEEDS)


def test_seed_interval_is_wider_than_a_trace_only_interval_when_seeds_disagree():
    # Two seeds whose gaps differ by 0.2 on every trace: the seed level must show in the width.
    n = np.full(30, 10.0)
    full = np.stack([np.zeros(30), np.full(30, 2.0)])
    ablation = np.full((2, 30), 3.0)
    wide = seed_trace_gap_figure(full, ablation, n, seed=0, resamples=2000, description="x")
    one = seed_trace_gap_figure(full[:1].repeat(2, 0), ablation, n, seed=0, description="x")
    assert wide.estimate == pytest.approx(0.2)
    assert wide.intervals[0].upper - wide.intervals[0].lower > 0.15
    assert one.intervals[0].upper - one.intervals[0].lower < 1e-9


def test_one_seed_gives_the_estimate_but_no_seed_interval():
    figure = seed_trace_gap_figure(
        np.zeros((1, 5)), np.ones((1, 5)), np.full(5, 2.0), seed=0, description="x"
    )
    assert figure.estimate == pytest.approx(0.5)
    assert figure.intervals[0].not_computable == "fewer than two training seeds"
    assert figure.intervals[0].lower is None


def test_duplicate_training_seeds_are_refused(per_seed_tv):
    splits = generate_reference_corpus({"train": 4, "dev": 1, "eval": 1, "transfer": 1})
    with pytest.raises(InputError, match="distinct"):
        load_reference_seeds(
            "trace-ai-full", splits["train"], manifest_for(splits), TrainConfig(), [1, 1]
        )
