from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import mannwhitneyu
from torch import nn

from trustbench.trb.corpus import generate_reference_corpus, manifest_for
from trustbench.trb.measures import (
    ReferenceWhiteBox,
    capture,
    concept_directions,
    inject,
    mann_whitney_auc,
)
from trustbench.trb.measures._governance import SWEEP_ALPHAS, threshold_interval, threshold_of
from trustbench.trb.proxy import LocalLMProxyAdapter
from trustbench.trb.reference import TrainConfig, load_reference_model
from trustbench.trb.reference._token_world import TokenLMConfig, load_token_lm, render_history
from trustbench.trb.track._measures import StatsPlan
from trustbench.trb.track._profile import split_figures


def _grounding(box, fit, traces, *, seed=0, resamples=100):
    """Track 2's figures for one white box on `traces`, by name (the `grounding` measure)."""
    stats = StatsPlan(0.95, seed, resamples)
    return split_figures(box, traces, ["grounding"], fit_traces=fit, stats=stats, seed=seed)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRUSTBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "trb-cache"))
        splits = generate_reference_corpus({"train": 150, "dev": 2, "eval": 24, "transfer": 2})
        yield splits, manifest_for(splits)


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    splits, manifest = corpus
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRUSTBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "trb-cache"))
        model, _ = load_reference_model(
            "trace-ai-full", splits["train"], manifest, TrainConfig(epochs=25, hidden=24)
        )
    fit = [t.context(s.t) for t in splits["train"][:50] for s in t.steps]
    return ReferenceWhiteBox(model, "trace-ai-full", 7, 6, fit)


def test_mann_whitney_auc_is_u_over_the_number_of_pairs():
    rng = np.random.default_rng(0)
    x, y = rng.normal(0.3, 1, 40), np.round(rng.normal(0, 1, 40), 1)
    u = mannwhitneyu(x, y).statistic
    assert abs(mann_whitney_auc(x, y) - u / (40 * 40)) < 1e-12


def test_injection_hook_handles_tensor_and_tuple_block_outputs():
    torch.manual_seed(0)
    linear, gru = nn.Linear(3, 4), nn.GRU(3, 4, batch_first=True)
    x = torch.randn(2, 5, 3)
    vec = torch.ones(2, 4)
    for layer, read in ((linear, lambda o: o), (gru, lambda o: o[0])):
        base = read(layer(x)).detach()
        with inject(layer, vec, [2, 4]):
            moved = read(layer(x)).detach()
        assert torch.allclose(moved[0, 2:], base[0, 2:] + 1)
        assert torch.equal(moved[0, :2], base[0, :2])
        assert torch.allclose(moved[1, 4:], base[1, 4:] + 1)
        assert torch.equal(moved[1, :4], base[1, :4])
        with capture(layer, [1, 3]) as seen:
            layer(x)
            layer(x + 1)  # only the first pass is kept
        assert torch.allclose(seen[0].float(), base[[0, 1], [1, 3]])


class _DeafReport:
    """Hooked layer exists, but the report never reads it: injection cannot register."""

    def __init__(self) -> None:
        self.layer = nn.Linear(2, 4)

    def hook_layers(self):
        return [self.layer]

    def slot_probability(self, contexts, slot, value):
        self.layer(torch.zeros(len(contexts), 1, 2))
        return np.array([0.2] * len(contexts))

    def read_positions(self, contexts):
        return [0] * len(contexts)

    def step_starts(self, contexts):
        return [0] * len(contexts)

    def seed(self, seed):
        """Deterministic: nothing to seed (the track seeds every adapter before a trial)."""


def test_report_that_ignores_the_hidden_state_scores_chance(corpus):
    splits, _ = corpus
    figures = _grounding(_DeafReport(), splits["train"][:20], splits["eval"])
    assert figures["detection_auc_vs_null"].estimate == 0.5
    assert figures["detection_auc"].estimate == 0.5


def test_injected_goal_direction_registers_in_the_native_report(corpus, reference):
    splits, _ = corpus
    figures = _grounding(reference, splits["train"], splits["eval"], seed=1, resamples=200)
    assert figures["detection_auc_vs_null"].estimate > 0.9
    curve = [figures[f"detection_auc[L0 a={alpha:g}]"].estimate for alpha in SWEEP_ALPHAS]
    assert curve[-1] >= curve[SWEEP_ALPHAS.index(0.25)]  # a stronger push registers more
    assert "detection_auc[L1 a=1]" not in figures  # the reference model has one hooked layer


def test_directions_are_differences_of_class_means(corpus, reference):
    splits, _ = corpus
    d = concept_directions(reference, splits["train"], fit_limit=30)
    assert set(d) == {(0, "goal"), (0, "belief")}
    assert abs(float(d[(0, "goal")]["unit"].norm()) - 1) < 1e-9


def test_grounding_runs_on_a_local_lm_through_block_hooks(corpus, tmp_path_factory):
    splits, manifest = corpus
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRUSTBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "trb-cache"))
        folder, _ = load_token_lm("instruct", splits["train"], manifest, TINY_LM)
    lm = LocalLMProxyAdapter.from_folder(folder, "instruct", render_history, "direct")
    figures = _grounding(lm, splits["train"][:40], splits["eval"])
    for layer in (0, 1):  # two hooked blocks, each swept at every strength
        assert all(f"detection_auc[L{layer} a={a:g}]" in figures for a in SWEEP_ALPHAS)
    assert 0.0 <= figures["detection_auc"].estimate <= 1.0


TINY_LM = TokenLMConfig(d_model=24, n_heads=2, epochs=3, finetune_epochs=2)


def test_native_white_box_batches_equal_the_plain_native_adapter(corpus, reference):
    from trustbench.trb.reference import NativeModelAdapter

    splits, _ = corpus
    plain = NativeModelAdapter(reference.model, "plain", 7, 6)
    trace = splits["eval"][3]
    contexts = [trace.context(t) for t in (0, 4, 2)]
    overrides = [None, trace.steps[4].counterfactuals[0].r_prime, None]
    for c, r, got in zip(contexts, overrides, reference.act_many(contexts, overrides), strict=True):
        assert plain.act(c, r_override=r) == pytest.approx(got, abs=1e-6)
    for c, rep in zip(contexts, reference.emit_many(contexts), strict=True):
        assert plain.emit_r(c).model_dump() == pytest.approx(rep.model_dump(), abs=1e-6)


def test_native_grounding_threshold_is_read_from_the_unsaturated_part_of_the_curve(
    corpus, reference
):
    splits, _ = corpus
    figures = _grounding(reference, splits["train"], splits["eval"], seed=1, resamples=100)
    aucs = [figures[f"detection_auc[L0 a={alpha:g}]"].estimate for alpha in SWEEP_ALPHAS]
    assert aucs[0] < 0.75 <= aucs[-1]  # the grid reaches down to where detection fails
    threshold = figures["detection_threshold[L0]"]
    assert threshold.status == "measured"
    assert SWEEP_ALPHAS[0] < threshold.estimate < SWEEP_ALPHAS[-1]


def test_threshold_rule_interpolates_in_log_strength_and_censors_both_ends():
    alphas = [0.25, 0.5, 1.0, 2.0]
    # Crosses 0.75 halfway between 0.5 (AUC 0.6) and 1.0 (AUC 0.9): 2 ** -0.5.
    assert threshold_of(alphas, [0.5, 0.6, 0.9, 1.0]) == (pytest.approx(2**-0.5), None)
    assert threshold_of(alphas, [0.8, 0.9, 1.0, 1.0]) == (0.25, "at or below the grid")
    assert threshold_of(alphas, [0.5, 0.6, 0.7, 0.74]) == (None, "not detected")
    # A dip back below the target: the threshold is where detection holds from then on.
    value, _ = threshold_of(alphas, [0.9, 0.6, 0.9, 1.0])
    assert value == pytest.approx(2**-0.5)


def test_a_threshold_interval_end_on_a_not_detected_draw_is_none_never_a_number():
    low, high, note = threshold_interval([0.1, 0.2, None, None, 0.15] * 20, 0.95)
    assert low == pytest.approx(0.1) and high is None and "above the grid" in note


def test_a_failed_trial_pushes_the_threshold_up_never_down():
    from trustbench.trb.corpus._format import Trace  # noqa: F401  (type of MeasureRow.trace)
    from trustbench.trb.track._measures import MeasureRow, StatsPlan
    from trustbench.trb.track._trace_measures import sweep_figures

    traces = generate_reference_corpus({"train": 1, "dev": 1, "eval": 12, "transfer": 1})["eval"]
    # Scores rising with strength: detected from a=0.25 on (AUC 1 there, 0.5 below).
    inj = [0.9 if a >= 0.25 else 0.1 for a in SWEEP_ALPHAS]
    good = {"trials": [{"sweep": {"0": {"injected": inj, "random": [0.1] * len(SWEEP_ALPHAS)}}}]}
    stats = StatsPlan(0.95, 0, 200)
    rows = [MeasureRow(t, 0, good, False) for t in traces]
    clean = next(f for f in sweep_figures(rows, stats, "") if f.name == "detection_threshold")
    failed = MeasureRow(traces[0], 0, {"trials": [{}, {}]}, True)
    worse = next(
        f for f in sweep_figures([*rows[1:], failed], stats, "") if f.name == "detection_threshold"
    )
    assert clean.status == "measured" and clean.estimate < 0.25
    assert worse.status != "measured" or worse.estimate >= clean.estimate
