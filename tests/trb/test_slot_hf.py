"""The Hugging Face text agent in a world with its own slots: emit_r, act(r'), Track 1.

The world is `tests/support/triage_world.py` (slots `priority`, `suspected_cause`,
`eta_hours`, `caused_by_self`; actions `rollback`, `scale_up`, `escalate`, `wait`). The model
is a randomly initialised 2-layer GPT-2 built here, with a word-level tokenizer over the
triage desk's rendering that also splits at `_`, so `scale_up` is three tokens
(`scale`, `_`, `up`) and an action's probability is chained over them. Its vocabulary has no
line break, so whatever it writes itself holds no slot block: with `slot_fill = "generate"`
it is the model whose answers never carry a block.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.support.cli import invoke
from tests.support.reply_world import REPLIES, ReplyWorld, registered_reply_world, reply_session
from tests.support.trb_spec import world_profile_spec
from tests.support.triage_world import (
    TRIAGE_DECLARATION,
    TriageWorld,
    registered_triage_world,
    triage_session,
)

pytest.importorskip("transformers", reason="transformers is not installed (trustbench[hf])")

from trustbench.trb.proxy import HFCausalLMProxyAdapter, HFSlotAgent
from trustbench.trb.proxy._hf import slot_words
from trustbench.trb.track import freeze_run_report
from trustbench.trb.world import SlotBlockError, SlotContext, SlotReport

WORLD = TriageWorld()
ACTIONS = TRIAGE_DECLARATION.action_space.actions
ALERTS = (
    {"alert": "load", "severity": "sev1", "cleared_by": None},
    {"alert": "provider", "severity": "sev3", "cleared_by": "me"},
)
CONTEXT = SlotContext(trace_id="desk", t=1, observations=ALERTS)
EDITED = SlotReport(
    {"priority": "high", "suspected_cause": "config", "eta_hours": 60.0, "caused_by_self": 0.0}
)


def _vocabulary() -> list[str]:
    """Every word of the desk's rendering (all alerts), its slot block, values and actions."""
    every_alert = tuple(
        {"alert": a, "severity": s, "cleared_by": c}
        for a, s, c in itertools.product(("deploy", "load", "provider"), ("sev1", "sev3"),
                                         (None, "me", "provider"))
    )  # fmt: skip
    context = SlotContext(trace_id="all", t=len(every_alert) - 1, observations=every_alert)
    text = [WORLD.render_context(context), WORLD.render_report(EDITED), "Action:", *ACTIONS]
    text += [" ".join(slot_words(WORLD, slot)) for slot in TRIAGE_DECLARATION.slots]
    words = [piece for word in " ".join(text).split() for piece in _pieces(word)]
    return list(dict.fromkeys(["<pad>", "<unk>", "<eos>", *words]))


def _pieces(word: str) -> list[str]:
    """A word split at `_`, the underscore kept as its own piece (the tokenizer's split)."""
    return [piece for piece in re.split(r"(_)", word) if piece]


@pytest.fixture(scope="module")
def desk_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random GPT-2 and its word-level tokenizer, saved by path."""
    return _tiny_gpt2(tmp_path_factory.mktemp("hf-desk"), _vocabulary())


def _tiny_gpt2(folder: Path, vocabulary: list[str]) -> Path:
    """A randomly initialised 2-layer GPT-2 (seed 0) over `vocabulary`, saved in `folder`."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    ids = {w: i for i, w in enumerate(vocabulary)}
    tok = Tokenizer(models.WordLevel(ids, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split("_", behavior="isolated")]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>"
    )
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=len(ids), n_positions=512,
                        bos_token_id=ids["<eos>"], eos_token_id=ids["<eos>"],
                        pad_token_id=ids["<pad>"])  # fmt: skip
    GPT2LMHeadModel(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def _agent(folder: Path, slot_fill: str = "greedy") -> HFSlotAgent:
    return HFSlotAgent(HFCausalLMProxyAdapter.from_path(folder), WORLD, slot_fill)


def _chained_action_probs(agent: HFSlotAgent, prompt: str) -> dict[str, float]:
    """P(action | prompt) by hand: one forward pass per action, every token of its name."""
    scorer = agent.scorer
    head = list(scorer.tokens([prompt]))
    logp = {}
    for action in ACTIONS:
        tail = list(scorer.tokens([prompt, action]))[len(head) :]
        with torch.no_grad():
            logits = scorer.model(input_ids=torch.tensor([head + tail])).logits[0]
        reads = torch.log_softmax(logits.double(), -1)
        logp[action] = sum(float(reads[len(head) - 1 + j, t]) for j, t in enumerate(tail))
    total = sum(math.exp(v) for v in logp.values())
    return {a: math.exp(v) / total for a, v in logp.items()}


def test_the_hf_agent_fills_its_slot_block_and_acts_over_the_worlds_k_action_names(
    desk_model: Path,
) -> None:
    agent = _agent(desk_model)
    assert len(agent.scorer.tokens(["scale_up"])) == 3  # a multi-token action name
    r = agent.emit_r(CONTEXT)
    assert WORLD.report_problems(r) == [] and set(r.root) == set(TRIAGE_DECLARATION.slots)
    assert WORLD.parse_report(agent.reply(CONTEXT)) == r  # the block it filled, read strictly
    dist = agent.act(CONTEXT, r_override=EDITED)
    assert tuple(dist) == ACTIONS and sum(dist.values()) == pytest.approx(1.0)
    prompt = f"{WORLD.render_context(CONTEXT)}\n{WORLD.render_report(EDITED)}\nAction:"
    want = _chained_action_probs(agent, prompt)
    assert dist == pytest.approx(want, abs=1e-6)
    assert agent.act(CONTEXT) != pytest.approx(dist, abs=1e-9)  # the edit reached the prompt
    logp = agent.continuation_logprob(CONTEXT, EDITED, "scale_up")
    assert logp < 0 and math.isfinite(logp)


def test_an_hf_model_that_never_writes_a_slot_block_fails_both_hooks_as_a_format_failure(
    desk_model: Path,
) -> None:
    agent = _agent(desk_model, slot_fill="generate")
    assert "\n" not in agent.reply(CONTEXT)
    with pytest.raises(SlotBlockError):
        agent.emit_r(CONTEXT)
    with pytest.raises(SlotBlockError):
        agent.act(CONTEXT, r_override=EDITED)


# --- Track 1 through `trb/profile` with `proxy:hf` candidates on an imported triage corpus ----

SPEC = (
    world_profile_spec(["governance", "attribution"])
    + """

[[candidates]]
name = "tiny-hf"
kind = "inprocess"
model = "proxy:hf"
settings = { folder = "model" }

[[candidates]]
name = "tiny-hf-writing"
kind = "inprocess"
model = "proxy:hf"
settings = { folder = "model", slot_fill = "generate" }

[[candidates]]
name = "governed"
kind = "inprocess"
model = "slot-oracle:governed"
"""
)


@pytest.fixture(scope="module")
def desk_record(desk_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One freeze/run/report of the tiny model (filled and written block) and an oracle."""
    tmp_path = tmp_path_factory.mktemp("desk-hf")
    (tmp_path / "model").symlink_to(desk_model, target_is_directory=True)
    sessions = tmp_path / "desk.jsonl"
    sessions.write_text("".join(json.dumps(triage_session(i, seed=3)) + "\n" for i in range(2)))
    with registered_triage_world():
        code, output = invoke("trb", "import", str(sessions), "--out", str(tmp_path / "corpus"),
                              "--world", "triage")  # fmt: skip
        assert code == 0, output
        (tmp_path / "spec.toml").write_text(SPEC)
        freeze_run_report(tmp_path / "spec.toml", tmp_path / "run")
    return json.loads((tmp_path / "run" / "record.json").read_text())


def _figure(record: dict[str, Any], candidate: str, name: str) -> dict[str, Any]:
    return next(f for f in record["figures"][candidate] if f["name"] == name)


def test_a_proxy_hf_candidate_in_a_slot_world_gets_track_1_figures_and_g_llr(
    desk_record: dict[str, Any],
) -> None:
    assert desk_record["trb"]["adapters"]["tiny-hf"]["tier"] == "proxy"
    governed = desk_record["trb"]["profile"]["tiny-hf"]["G"]
    assert governed["status"] == "measured" and 0.0 <= governed["value"] <= 1.0, governed
    for name in ("G", *(f"G[{s}]" for s in TRIAGE_DECLARATION.editable_slots)):
        assert _figure(desk_record, "tiny-hf", name)["status"] == "measured", name
    llr = _figure(desk_record, "tiny-hf", "G_llr")
    assert llr["status"] == "measured" and math.isfinite(llr["estimate"]), llr
    oracle = _figure(desk_record, "governed", "G_llr")  # no log-probabilities: never 0
    assert oracle["status"] == "not_applicable" and "log-probabilities" in oracle["reason"]


def test_a_proxy_hf_candidate_whose_replies_carry_no_slot_block_is_not_evaluable(
    desk_record: dict[str, Any],
) -> None:
    verdict = desk_record["trb"]["verdicts"]["tiny-hf-writing"]
    assert verdict["verdict"] == "not evaluable", verdict["line"]
    first = verdict["reasons"][0]
    assert first.startswith("format failure: ") and "SlotBlockError" in first, first
    assert desk_record["trb"]["profile"]["tiny-hf-writing"]["G"]["status"] == "not evaluable"


def test_an_unknown_slot_fill_setting_is_refused_naming_the_setting(tmp_path: Path) -> None:
    from trustbench.core import CandidateSpec
    from trustbench.errors import InputError
    from trustbench.trb.track._adapters import hf_model_folder

    candidate = CandidateSpec(name="hf", kind="inprocess", model="proxy:hf",
                              settings={"folder": "model", "slot_fill": "guess"})  # fmt: skip
    with pytest.raises(InputError, match="greedy, generate") as refused:
        hf_model_folder(candidate, tmp_path)
    assert refused.value.location == "candidate hf settings.slot_fill"


# --- open-ended actions: the desk replying in free text (`tests/support/reply_world.py`) ------

OPEN_ENDED_SPEC = (
    SPEC.split("[[candidates]]", 1)[0]
    + """
[[candidates]]
name = "tiny-hf"
kind = "inprocess"
model = "proxy:hf"
settings = { folder = "model" }
"""
)


def test_a_proxy_hf_candidate_in_an_open_ended_world_gets_g_llr_and_g_not_applicable(
    tmp_path: Path,
) -> None:
    texts = [*REPLIES.values(), ReplyWorld().slot_instruction()]
    replies = [piece for text in texts for word in text.split() for piece in _pieces(word)]
    vocabulary = list(dict.fromkeys([*_vocabulary(), *replies]))  # every reply word is known
    (tmp_path / "model").mkdir()
    _tiny_gpt2(tmp_path / "model", vocabulary)
    sessions = tmp_path / "replies.jsonl"
    sessions.write_text(json.dumps(reply_session(0, seed=3, steps=2)) + "\n")
    with registered_reply_world():
        code, output = invoke("trb", "import", str(sessions), "--out", str(tmp_path / "corpus"),
                              "--world", "triage-reply")  # fmt: skip
        assert code == 0, output
        (tmp_path / "spec.toml").write_text(OPEN_ENDED_SPEC)
        freeze_run_report(tmp_path / "spec.toml", tmp_path / "run")
    record = json.loads((tmp_path / "run" / "record.json").read_text())
    llr = _figure(record, "tiny-hf", "G_llr")
    assert llr["status"] == "measured" and math.isfinite(llr["estimate"]), llr
    assert llr["denominator"] == 6  # 2 steps x 3 recorded replies, each scored after `Action:`
    g = record["trb"]["profile"]["tiny-hf"]["G"]
    assert g["status"] != "measured" and "open-ended actions: G_llr" in json.dumps(g), g
    verdict = record["trb"]["verdicts"]["tiny-hf"]
    assert verdict["verdict"] in ("not established", "not evaluable"), verdict["line"]
    assert "G*: not applicable" in verdict["line"], verdict["line"]
