"""The chat proxy on an endpoint without logprobs: a declared sampling estimator (issue 28, part 4).

The fake server never returns logprobs and answers every sampled request with an action drawn
from a known distribution, so the estimate can be checked against the truth and the interval's
sampling part against the number of samples.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer, raw_body
from tests.trb.test_trb_track import freeze_run_report, write_spec

from trustbench.core.stats import clustered_figure
from trustbench.trb.corpus import generate_split
from trustbench.trb.measures import governance_rows, summarize_governance
from trustbench.trb.measures._governance import widen_figure, with_sampling_error
from trustbench.trb.proxy._chat import ChatProxyAdapter
from trustbench.trb.track._pipeline import TrbTrackOptions

TRUTH = {"left": 0.2, "stay": 0.3, "right": 0.5}
OWN = "The door is open. <r> goal=right belief=open plan=right conf=8 self=na </r>"


def _completion(text: str) -> str:
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": "stop",
    }
    return json.dumps({"id": "x", "model": "sampled", "choices": [choice]})


def _no_logprobs_server(seed: int = 7) -> Any:
    """A chat model with no logprobs: reasoning at temperature 0, TRUTH-distributed samples."""
    rng = random.Random(seed)
    words = list(TRUTH)

    def script(body: dict[str, Any], _n: int) -> Any:
        if body.get("temperature") == 1.0:
            return raw_body(_completion(rng.choices(words, weights=list(TRUTH.values()))[0]))
        return raw_body(_completion(OWN))  # the reasoning, or a logprob request answered bare

    return script


def _adapter(server: OpenAIServer, samples: int, estimator: str = "sampling") -> ChatProxyAdapter:
    return ChatProxyAdapter(server.base_url, "sampled", name="chat", samples=samples,
                            estimator=estimator)  # fmt: skip


def _traces(n: int) -> list[Any]:
    return [t.model_copy(update={"steps": t.steps[:1]}) for t in generate_split("eval", n, seed=21)]


def test_the_sampled_distribution_converges_to_the_servers_own() -> None:
    context = _traces(1)[0].context(0)
    with OpenAIServer() as server:
        server.script(_no_logprobs_server())
        adapter = _adapter(server, samples=600)
        dist = adapter.act(context)
        adapter.close()
        sent = [r.body for r in server.requests]
    # sd of each frequency <= sqrt(0.25 / 600) = 0.0204; 0.07 is about 3.4 sd.
    assert max(abs(dist[a] - TRUTH[a]) for a in TRUTH) < 0.07
    assert adapter.sample_sizes == [600] and adapter.calls["sampled"] == 1
    assert not any(b.get("logprobs") for b in sent)  # `sampling` never asks for logprobs
    assert "600 samples each" in adapter.estimation


def test_auto_asks_for_logprobs_once_then_samples_when_none_come_back() -> None:
    context = _traces(1)[0].context(0)
    with OpenAIServer() as server:
        server.script(_no_logprobs_server())
        adapter = _adapter(server, samples=5, estimator="auto")
        adapter.act(context)
        adapter.close()
        asked = [r.body for r in server.requests if r.body.get("logprobs")]
    assert len(asked) == 1 and adapter.sample_sizes == [5]


def test_g_interval_widens_as_the_declared_samples_per_item_fall() -> None:
    traces = _traces(3)
    widths, sampling = {}, {}
    for n in (4, 64):
        with OpenAIServer() as server:
            server.script(_no_logprobs_server())
            adapter = _adapter(server, samples=n)
            rows = governance_rows(adapter, traces, seed=0)
            adapter.close()
        g = summarize_governance(rows, seed=0, resamples=400)["G"]
        widths[n], sampling[n] = g["high"] - g["low"], g["sampling"]
        assert g["low"] <= g["value"] <= g["high"]
        assert sampling[n]["sampled_items"] == g["items"] and sampling[n]["samples_min"] <= n
    assert sampling[4]["sd"] > 2 * sampling[64]["sd"] > 0
    assert widths[4] > widths[64]


def test_an_exact_adapter_gets_no_sampling_part() -> None:
    g = {"value": 0.75, "low": 0.7, "high": 0.8, "items": 4, "interval": {"level": 0.95}}
    assert with_sampling_error(g, [{"tv_sum": 1.0, "n_items": 4}]) is g


def test_one_sampled_trace_gets_a_sampling_interval_never_an_exact_looking_figure() -> None:
    figure = clustered_figure("G", [6.0], [8.0], ["t0"], description="G", cluster="trace",
                              unit="trial", confidence=0.95, seed=0, resamples=200)  # fmt: skip
    widened = widen_figure(figure, [{"sampled_items": 8, "samples_min": 4,
                                     "tv_sampling_var_sum": 8 * 0.02}])  # fmt: skip
    interval = widened.intervals[0]
    assert interval.not_computable is None and "widened for sampling" in (interval.note or "")
    assert interval.lower < widened.estimate < interval.upper
    assert widen_figure(figure, [{"tv_sum": 2.0}]) is figure  # nothing sampled: unchanged


def test_the_sampling_estimator_is_declared_in_the_track_options() -> None:
    options = TrbTrackOptions.model_validate({"chat_samples": 16, "chat_estimator": "sampling"})
    assert (options.chat_samples, options.chat_estimator) == (16, "sampling")
    with pytest.raises(ValueError):
        TrbTrackOptions.model_validate({"chat_samples": 0})
    with pytest.raises(ValueError):
        ChatProxyAdapter("http://127.0.0.1:9/v1", "m", name="x", estimator="guess")


def test_a_profile_run_on_a_chat_endpoint_without_logprobs_widens_g_for_its_sampling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The declared estimator reaches the track: no logprob request, G's interval widened."""
    monkeypatch.setenv("TRUSTBENCH_CACHE", str(tmp_path / "cache"))
    with OpenAIServer() as server:
        server.script(_no_logprobs_server())
        chat = ('[[candidates]]\nname = "chat"\nkind = "openai_chat"\nmodel = "sampled"\n'
                f'base_url = "{server.base_url}"\n')  # fmt: skip
        spec = write_spec(tmp_path, {}, sizes="{ train = 20, eval = 2, transfer = 1 }",
                          options='measures = ["governance"]\nconformance_traces = 1\n'
                          'splits = ["eval"]\nchat_samples = 4\nchat_estimator = "sampling"',
                          extra=chat)  # fmt: skip
        record = freeze_run_report(spec, tmp_path / "run")
        asked_logprobs = [r for r in server.requests if r.body.get("logprobs")]
    assert asked_logprobs == []
    g = next(f for f in record["figures"]["chat"] if f["name"] == "G")
    assert g["status"] == "measured"
    notes = [i.get("note") or "" for i in g["intervals"]]
    assert any("widened for sampling" in n and ">= " in n for n in notes), notes


def _answers_server(answers: list[str]) -> Any:
    """Reasoning at temperature 0; sampled answers taken from `answers` in turn."""
    turn = iter(answers * 100)

    def script(body: dict[str, Any], _n: int) -> Any:
        if body.get("temperature") == 1.0:
            return raw_body(_completion(next(turn)))
        return raw_body(_completion(OWN))

    return script


def test_a_negated_or_padded_answer_is_a_parse_failure_never_the_action_it_names() -> None:
    context = _traces(1)[0].context(0)
    with OpenAIServer() as server:
        server.script(_answers_server(["not right", "Right.", "left or right", " stay\n"]))
        adapter = _adapter(server, samples=4)
        dist = adapter.act(context)
        adapter.close()
    assert dist == {"left": 0.0, "stay": 0.5, "right": 0.5}
    assert adapter.sample_sizes == [2] and adapter.calls["unparsed_samples"] == 2
    assert adapter.unparsed_examples == ["not right", "left or right"]
    assert "2 sampled answer(s) named no action" in adapter.estimation


def test_a_model_that_never_answers_in_the_format_gets_no_action() -> None:
    context = _traces(1)[0].context(0)
    with OpenAIServer() as server:
        server.script(_answers_server(["not right", "I would go"]))
        adapter = _adapter(server, samples=4)
        with pytest.raises(RuntimeError, match="no sampled answer named an action"):
            adapter.act(context)
        adapter.close()
    assert adapter.calls["failed"] == 1 and adapter.calls["unparsed_samples"] == 4
