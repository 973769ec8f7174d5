from __future__ import annotations

import json
import math

import pytest
from tests.support.openai_server import OpenAIServer, probe_reply, raw_body, server_error

from trustbench.trb.corpus import generate_split, write_corpus
from trustbench.trb.corpus._generate import generate_text_corpus, text_worlds
from trustbench.trb.measures import governance_rows, summarize_governance
from trustbench.trb.measures._governance import _emit
from trustbench.trb.proxy import SlotParseError, parse_slot_text
from trustbench.trb.proxy._chat import ChatProxyAdapter, ChatTextAgent
from trustbench.trb.track import freeze_run_report
from trustbench.trb.world import TEXT_ACTIONS, TextParseError, TextWorld, TextWorldAdapter

OWN = (
    "The goal is right and the door is open. "
    "<r> goal=right belief=open plan=right conf=8 self=na </r>"
)


def _completion(text: str, top: list[tuple[str, float]] | None) -> str:
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": "stop",
    }
    if top is not None:
        choice["logprobs"] = {
            "content": [
                {
                    "token": top[0][0],
                    "logprob": math.log(top[0][1]),
                    "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in top],
                }
            ]
        }
    return json.dumps({"id": "x", "model": "scripted", "choices": [choice]})


def _scripted(governed: bool, own: str = OWN):
    """A scripted chat model: states `own` reasoning; acts on the slot block it is given
    (governed) or always moves right whatever the block says (a Potemkin narrator)."""

    def script(body, _n):
        messages = body["messages"]
        if not body.get("logprobs"):
            return raw_body(_completion(own, None))
        last = messages[-1]
        if last["role"] == "assistant" and governed:
            plan = parse_slot_text(last["content"]).planned_next
        else:
            plan = "right" if last["role"] == "assistant" else "stay"
        others = [a for a in ("left", "stay", "right") if a != plan]
        top = [(f" {plan}", 0.7), (f" {others[0]}", 0.1), (others[1], 0.1), ("The", 0.1)]
        return raw_body(_completion(plan, top))

    return script


@pytest.fixture
def traces():
    return generate_split("eval", 3, seed=21)


def _adapter(server: OpenAIServer, **kw) -> ChatProxyAdapter:
    return ChatProxyAdapter(server.base_url, "scripted", name="chat", **kw)


def test_action_distribution_comes_from_logprobs_over_the_option_words(traces):
    with OpenAIServer() as server:
        server.script(_scripted(governed=True))
        adapter = _adapter(server)
        dist = adapter.act(traces[0].context(0))
        adapter.close()
    # 0.7 / 0.1 / 0.1 on the options, 0.1 on a non-option token: renormalised over options.
    assert dist == pytest.approx({"left": 0.1 / 0.9, "stay": 0.1 / 0.9, "right": 0.7 / 0.9})
    assert adapter.option_mass == [pytest.approx(0.9)]
    assert adapter.calls == {"logprobs": 1, "sampled": 0, "failed": 0, "unparsed_samples": 0}


def test_override_re_renders_only_the_slot_span_and_prefills_it(traces):
    with OpenAIServer() as server:
        server.script(_scripted(governed=True))
        adapter = _adapter(server)
        context = traces[0].context(1)
        r_prime = adapter.emit_r(context).model_copy(update={"planned_next": "left"})
        dist = adapter.act(context, r_override=r_prime)
        adapter.close()
        prefill = server.requests[-1].body["messages"][-1]
    assert prefill["role"] == "assistant"
    assert prefill["content"] == OWN.replace("plan=right", "plan=left") + "\nAction:"
    assert max(dist, key=dist.get) == "left"


def test_governed_chat_model_scores_higher_G_than_a_potemkin_narrator(traces):
    scores = {}
    for governed in (True, False):
        with OpenAIServer() as server:
            server.script(_scripted(governed=governed))
            adapter = _adapter(server)
            rows = governance_rows(adapter, traces)
            adapter.close()
        scores[governed] = summarize_governance(rows, seed=0, resamples=100)["G"]["value"]
        assert sum(r["invalid"] for r in rows) == 0
    assert scores[True] > scores[False] + 0.1


def test_missing_logprobs_fall_back_to_samples_with_the_bias_stated(traces):
    with OpenAIServer() as server:
        answers = iter(["left", "left", "stay", "I go left", "right", "left", "?", "left"])

        def script(body, _n):
            if body.get("max_tokens") == 3:  # a sampled completion
                return raw_body(_completion(next(answers), None))
            return raw_body(_completion("left" if body.get("logprobs") else OWN, None))

        server.script(script)
        adapter = _adapter(server, samples=8)
        dist = adapter.act(traces[0].context(0))
        adapter.close()
    # "I go left" and "?" are not one action word: parse failures, counted, not actions.
    assert dist == pytest.approx({"left": 4 / 6, "stay": 1 / 6, "right": 1 / 6})
    assert adapter.calls["sampled"] == 1 and adapter.calls["unparsed_samples"] == 2
    assert "8 samples" in adapter.estimation and "biased upward" in adapter.estimation


def test_reply_without_a_slot_block_is_a_missing_report_not_a_default(traces):
    with OpenAIServer() as server:
        server.script(lambda body, n: raw_body(_completion("I would go right.", None)))
        adapter = _adapter(server)
        with pytest.raises(SlotParseError):
            adapter.emit_r(traces[0].context(0))
        assert _emit(adapter, traces[0].context(0)) is None
        adapter.close()


def test_service_failure_counts_as_an_invalid_response(traces):
    with OpenAIServer() as server:
        server.script(lambda body, n: server_error())
        adapter = _adapter(server)
        rows = governance_rows(adapter, traces[:1])
        adapter.close()
    assert rows[0]["invalid"] == rows[0]["n_items"] > 0
    assert rows[0]["tv_sum"] == rows[0]["n_items"]  # each failure scores TV = 1


# ------------------------------------------------------------------------------------------------
# The chat proxy in the text world: the world renders the context and parses the slot block.

TEXT_CORPUS = generate_text_corpus({"train": 0, "dev": 0, "eval": 2, "transfer": 0}, seed=5)["eval"]


def _text_scripted(governed: bool):
    """A scripted chat model in the text world: states the exact reference block after a line
    of prose; acts on the block it is given (governed) or always on `increase`."""

    def script(body, _n):
        messages = body["messages"]
        world = _text_world_of(messages[0]["content"])
        if not body.get("logprobs"):
            own = world.render_report(world.reference_report(messages[0]["content"]))
            return raw_body(_completion(f"Let me look at the levels.\n{own}", None))
        plan = "increase"
        if governed:
            corridor = world.parse_report(messages[-1]["content"]).planned_next
            plan = {"left": "decrease", "stay": "hold", "right": "increase"}[corridor]
        others = [a for a in TEXT_ACTIONS if a != plan]
        top = [(f" {plan}", 0.8), (f" {others[0]}", 0.1), (others[1], 0.1)]
        return raw_body(_completion(plan, top))

    return script


def _text_world_of(prompt: str) -> TextWorld:
    """The task a prompt states (the first eval trace whose task reads its step lines)."""
    for trace in TEXT_CORPUS:
        world = TextWorld(trace.task, trace.world)
        try:
            if world.read_observations(prompt):
                return world
        except TextParseError:
            continue
    raise AssertionError(f"no trace states {prompt!r}")


def _text_adapter(server: OpenAIServer, trace) -> TextWorldAdapter:
    chat = ChatTextAgent(_adapter(server))
    return TextWorldAdapter(chat, TextWorld(trace.task, trace.world))


def test_the_text_chat_proxy_edits_only_the_slot_block_and_reads_the_option_keys():
    trace = TEXT_CORPUS[0]
    world = TextWorld(trace.task, trace.world)
    context = trace.context(1)
    with OpenAIServer() as server:
        server.script(_text_scripted(governed=True))
        adapter = _text_adapter(server, trace)
        r = adapter.emit_r(context)
        r_prime = r.model_copy(
            update={"planned_next": "left" if r.planned_next != "left" else "right"}
        )
        dist = adapter.act(context, r_override=r_prime)
        adapter.close()
        prompt = server.requests[0].body["messages"][0]["content"]
        prefill = server.requests[-1].body["messages"][-1]
    assert prompt == world.render_context(context)  # the world's rendering is the model's view
    assert prefill["role"] == "assistant"
    assert prefill["content"] == (
        f"Let me look at the levels.\n{world.render_report(r_prime)}\nOption:"
    )
    assert max(dist, key=dist.get) == r_prime.planned_next  # the tracks read corridor keys


def test_a_governed_text_chat_model_scores_higher_g_than_one_that_ignores_its_block():
    scores = {}
    for governed in (True, False):
        with OpenAIServer() as server:
            server.script(_text_scripted(governed=governed))
            chat = ChatTextAgent(_adapter(server))
            adapter = TextWorldAdapter(chat, text_worlds(TEXT_CORPUS))
            rows = governance_rows(adapter, TEXT_CORPUS)
            adapter.close()
        assert sum(r["invalid"] for r in rows) == 0
        scores[governed] = summarize_governance(rows, seed=0, resamples=100)["G"]["value"]
    assert scores[True] > scores[False] + 0.1


def test_a_text_chat_reply_without_the_slot_block_is_a_format_failure_not_ungoverned():
    trace = TEXT_CORPUS[0]
    with OpenAIServer() as server:
        server.script(lambda body, n: raw_body(_completion("I would add a replica.", None)))
        adapter = _text_adapter(server, trace)
        with pytest.raises(TextParseError, match="no line for Goal"):
            adapter.emit_r(trace.context(1))
        assert _emit(adapter, trace.context(1)) is None  # a missing report, never a default
        adapter.close()


def test_a_chat_candidate_runs_on_a_text_world_corpus_through_the_harness(tmp_path):
    write_corpus(tmp_path / "corpus", {"eval": TEXT_CORPUS})
    with OpenAIServer() as server:
        text = _text_scripted(governed=True)
        server.script(lambda body, n: probe_reply(body) or text(body, n))
        (tmp_path / "spec.toml").write_text(
            'suite = "trb"\ntrack = "profile"\nconcurrency = 1\n[corpus]\npath = "corpus"\n'
            '[track_options]\nmeasures = ["governance"]\nsplits = ["eval"]\n'
            '[[candidates]]\nname = "chat"\nkind = "openai_chat"\nmodel = "scripted"\n'
            f'base_url = "{server.base_url}"\n'
        )
        freeze_run_report(tmp_path / "spec.toml", tmp_path / "run")
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    assert record["trb"]["profile"]["chat"]["G"]["status"] == "measured"
    assert record["trb"]["profile"]["chat"]["G"]["value"] > 0.5
