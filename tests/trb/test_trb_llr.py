"""Track 1's paired log-likelihood-ratio G for open-ended actions (issue 54, deliverable 3).

Per intervention LLR = log p(Phi(r') | c, r') - log p(Phi(r') | c, r_t); `G_llr` is their mean,
clustered by trace. Exact on a synthetic adapter with known probabilities; the local LM proxy
scores a continuation as its own forward pass does; an adapter without log-probabilities is
"not applicable", never 0.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from trustbench.trb.adapter import LogProbAdapter, SelfReport, StepContext
from trustbench.trb.corpus import generate_split
from trustbench.trb.instruments._oracles import GovernedOracle
from trustbench.trb.isolation._client import AdapterWorker, adapter_plan
from trustbench.trb.measures import (
    LlrIntervention,
    continuation_llr,
    llr_governance,
    scores_continuations,
)
from trustbench.trb.proxy._causal_lm import TinyCausalLM, WordTokenizer
from trustbench.trb.proxy._local import LocalLMProxyAdapter
from trustbench.trb.reference._token_world import render_history, vocabulary
from trustbench.trb.track._profile import RecordingAdapter

ON_PLAN, OFF_PLAN = 0.6, 0.2
"""The synthetic adapter's p(text | c, r): the r's plan word, or any other text."""


class KnownProbabilities:
    """p(continuation | c, r) = 0.6 when the text is r's plan, else 0.2 (governed by r)."""

    def continuation_logprob(
        self, context: StepContext, r_override: SelfReport | None, continuation: str
    ) -> float:
        assert r_override is not None  # the LLR always passes r or r' explicitly
        return math.log(ON_PLAN if continuation == r_override.planned_next else OFF_PLAN)


class IgnoresR(KnownProbabilities):
    """Scores every text by the stored trace alone: r never enters."""

    def continuation_logprob(
        self, context: StepContext, r_override: SelfReport | None, continuation: str
    ) -> float:
        return math.log(ON_PLAN if continuation == "left" else OFF_PLAN)


class Faulty(KnownProbabilities):
    """Returns a non-finite log-probability for one text: an invalid answer."""

    def continuation_logprob(
        self, context: StepContext, r_override: SelfReport | None, continuation: str
    ) -> float:
        if continuation == "stay":
            return math.nan
        return super().continuation_logprob(context, r_override, continuation)


def _report(plan: str) -> SelfReport:
    return SelfReport(goal="left", belief="open", planned_next=plan, confidence=0.5)  # type: ignore[arg-type]


def _interventions() -> list[LlrIntervention]:
    """Trace A: r' moves the plan (right, then stay); trace B: an identity edit (left)."""
    context = StepContext(trace_id="A", t=0, observations=())
    r = _report("left")
    return [
        LlrIntervention("A", context, r, _report("right"), "right"),
        LlrIntervention("A", context, r, _report("stay"), "stay"),
        LlrIntervention("B", context.model_copy(update={"trace_id": "B"}), r, r, "left"),
    ]


def test_the_paired_llr_is_exact_on_an_adapter_with_known_probabilities() -> None:
    items = _interventions()
    adapter = KnownProbabilities()
    first = items[0]
    llr = continuation_llr(adapter, first.context, first.r, first.r_prime, first.continuation)
    assert llr == pytest.approx(math.log(ON_PLAN / OFF_PLAN), abs=1e-15)
    figure = llr_governance(adapter, items, resamples=200)
    assert figure.status == "measured" and figure.name == "G_llr"
    assert figure.estimate == pytest.approx(2 * math.log(3) / 3, abs=1e-12)
    assert figure.cluster == "trace"
    assert {i.groups for i in figure.intervals if i.groups is not None} == {2}


def test_an_adapter_whose_text_probabilities_ignore_r_scores_exactly_zero() -> None:
    figure = llr_governance(IgnoresR(), _interventions(), resamples=200)
    assert figure.status == "measured" and figure.estimate == 0.0


def test_an_adapter_without_log_probabilities_is_not_applicable_never_zero() -> None:
    oracle = GovernedOracle()
    assert not scores_continuations(oracle) and not isinstance(oracle, LogProbAdapter)
    figure = llr_governance(oracle, _interventions())
    assert figure.status == "not_applicable" and figure.estimate is None
    assert "no log-probabilities" in str(figure.reason)


def test_a_non_finite_log_probability_is_an_invalid_answer_left_out_and_counted() -> None:
    figure = llr_governance(Faulty(), _interventions(), resamples=200)
    assert figure.estimate == pytest.approx(math.log(3) / 2, abs=1e-12)
    assert "1 invalid answer(s) left out" in figure.description


@pytest.fixture(scope="module")
def tiny_lm() -> LocalLMProxyAdapter:
    """A randomly initialised word-level causal LM over the token world's words (no files)."""
    torch.manual_seed(0)
    tokenizer = WordTokenizer(vocabulary())
    model = TinyCausalLM(len(tokenizer.vocab), d_model=16, n_layers=1, n_heads=2, max_len=128)
    return LocalLMProxyAdapter(model, tokenizer, "tiny", render_history, "reasoning-first")


def test_the_local_lm_scores_a_continuation_as_its_own_forward_pass_reads_it(
    tiny_lm: LocalLMProxyAdapter,
) -> None:
    trace = generate_split("eval", 1, 3)[0]
    step = trace.steps[1]
    context, r_prime = trace.context(step.t), step.counterfactuals[0].r_prime
    prompt = tiny_lm.act_prompt(context, r_prime)
    text = ["right", "left"]
    ids = torch.tensor([tiny_lm._ids([*prompt, *text])])
    with torch.no_grad():
        logp = torch.log_softmax(tiny_lm.model(ids)[0].double(), -1)
    start = len(prompt) - 1
    expected = float(sum(logp[start + j, ids[0, start + j + 1]] for j in range(len(text))))
    got = tiny_lm.continuation_logprob(context, r_prime, " ".join(text))
    assert got == pytest.approx(expected, abs=1e-9)
    assert isinstance(tiny_lm, LogProbAdapter)


def test_g_llr_runs_on_the_local_lm_over_stored_edits_clustered_by_trace(
    tiny_lm: LocalLMProxyAdapter,
) -> None:
    items = [
        LlrIntervention(trace.trace_id, trace.context(step.t), step.r, cf.r_prime,
                        cf.r_prime.planned_next)
        for trace in generate_split("eval", 3, 3)
        for step in trace.steps[:2]
        for cf in step.counterfactuals[:2]
    ]  # fmt: skip
    figure = llr_governance(tiny_lm, items, resamples=200)
    assert figure.status == "measured" and figure.estimate is not None
    assert math.isfinite(figure.estimate)
    assert {i.groups for i in figure.intervals if i.groups is not None} == {3}


def test_a_sandboxed_adapter_is_asked_for_log_probabilities_only_when_it_offers_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through its worker and the recorder (opaque ids), as a submitted adapter is asked."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    trace = generate_split("eval", 1, 3)[0]
    step = trace.steps[1]
    items = [
        LlrIntervention(trace.trace_id, trace.context(step.t), step.r, cf.r_prime,
                        cf.r_prime.planned_next)
        for cf in step.counterfactuals
    ]  # fmt: skip
    moved = sum(cf.r_prime.planned_next != step.r.planned_next for cf in step.counterfactuals)
    for target, expected in (("scores_text", moved * math.log(3) / len(items)), ("governed", None)):
        module = f"trb_isolation_adapters:{target}"
        worker = AdapterWorker(module, adapter_plan(module))
        try:
            recorder = RecordingAdapter(worker.adapter())
            recorder.blind_key = "k" * 64
            figure = llr_governance(recorder, items, resamples=50)
        finally:
            worker.close()
        if expected is None:
            assert figure.status == "not_applicable", target
        else:
            assert figure.estimate == pytest.approx(expected, abs=1e-12), target
            assert all(c["hook"] == "continuation_logprob" for c in recorder.calls)
