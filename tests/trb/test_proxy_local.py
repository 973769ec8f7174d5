from __future__ import annotations

import json

import pytest
import torch

from trustbench.errors import CheckFailed, InputError
from trustbench.trb.adapter import check_adapter
from trustbench.trb.corpus import generate_reference_corpus, manifest_for
from trustbench.trb.proxy import (
    LocalLMProxyAdapter,
    SlotParseError,
    load_local_lm,
    parse_slot_text,
    render_slot_text,
)
from trustbench.trb.proxy._local import render_slots
from trustbench.trb.reference._token_world import (
    TokenLMConfig,
    documents,
    load_token_lm,
    render_history,
    vocabulary,
)

TINY_LM = TokenLMConfig(d_model=24, n_heads=2, epochs=3, finetune_epochs=2)


@pytest.fixture(scope="module")
def corpus():
    splits = generate_reference_corpus({"train": 150, "dev": 2, "eval": 24, "transfer": 2})
    return splits, manifest_for(splits)


@pytest.fixture(scope="module")
def folders(corpus, tmp_path_factory):
    splits, manifest = corpus
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRUSTBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "trb-cache"))
        base, base_card = load_token_lm("instruct", splits["train"], manifest, TINY_LM)
        sft, sft_card = load_token_lm("cot-sft", splits["train"], manifest, TINY_LM)
    return {"instruct": (base, base_card), "cot-sft": (sft, sft_card)}


def test_slot_block_round_trips_a_report_to_a_tenth(corpus):
    splits, _ = corpus
    for step in splits["eval"][0].steps:
        back = parse_slot_text(f"some reasoning {render_slot_text(step.r)} trailing")
        assert (back.goal, back.belief, back.planned_next) == (
            step.r.goal, step.r.belief, step.r.planned_next,
        )  # fmt: skip
        assert abs(back.confidence - step.r.confidence) <= 0.05 + 1e-12


def test_text_without_a_well_formed_slot_block_is_refused():
    with pytest.raises(SlotParseError):
        parse_slot_text("<r> goal=up belief=open plan=left conf=3 self=na </r>")


def test_every_training_document_is_in_the_vocabulary(corpus):
    splits, _ = corpus
    vocab = set(vocabulary())
    docs = documents(splits["train"][:5], ("report", "action", "cot"))
    assert all(w in vocab for d in docs for w in d)


def test_act_returns_exact_option_probabilities_from_the_logits(corpus, folders):
    splits, _ = corpus
    model, tok, _ = load_local_lm(folders["cot-sft"][0])
    adapter = LocalLMProxyAdapter(model, tok, "sft", render_history, "reasoning-first")
    context = splits["eval"][0].context(2)
    r = splits["eval"][0].steps[2].r
    words = [*render_history(context.observations), *render_slots(r), "<act>"]
    with torch.no_grad():
        logits = model(torch.tensor([[tok.id_of(w) for w in words]]))[0, -1].double()
    p = torch.softmax(logits, -1)[[tok.id_of(a) for a in ("left", "stay", "right")]]
    want = dict(zip(("left", "stay", "right"), (p / p.sum()).tolist(), strict=True))
    assert adapter.act(context, r_override=r) == pytest.approx(want, abs=1e-12)


def test_override_changes_only_the_slot_span_of_the_prompt(corpus, folders):
    splits, _ = corpus
    adapter = LocalLMProxyAdapter.from_folder(
        folders["cot-sft"][0], "sft", render_history, "reasoning-first"
    )
    seen = []
    original = adapter.next_option_probs
    adapter.next_option_probs = lambda prompts, options: (
        seen.append(prompts) or original(prompts, options)
    )
    context = splits["eval"][1].context(3)
    own = adapter.emit_r(context)
    seen.clear()
    adapter.act(context)
    flipped = {
        "goal": "left" if own.goal == "right" else "right",
        "belief": "open" if own.belief == "closed" else "closed",
    }
    adapter.act(context, r_override=own.model_copy(update=flipped))
    a, b = seen[0][0], seen[1][0]
    diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    assert len(a) == len(b)
    assert [b[i] for i in diff] == ["goal=" + flipped["goal"], "belief=" + flipped["belief"]]


def test_instruct_template_acts_without_reasoning_and_cot_template_acts_on_its_own(corpus, folders):
    splits, _ = corpus
    context = splits["eval"][2].context(1)
    direct = LocalLMProxyAdapter.from_folder(folders["instruct"][0], "i", render_history, "direct")
    cot = LocalLMProxyAdapter.from_folder(
        folders["instruct"][0], "c", render_history, "reasoning-first"
    )
    assert direct.act(context) == direct.act_without_r(context)
    assert cot.act(context) == cot.act(context, r_override=cot.emit_r(context))


def test_cot_finetune_starts_from_the_instruct_weights_and_is_cached(corpus, folders):
    assert folders["cot-sft"][1]["finetuned_from"] == "instruct"
    assert folders["instruct"][1]["cache_key"] != folders["cot-sft"][1]["cache_key"]


def test_local_lm_adapter_passes_the_conformance_kit(folders):
    def factory():
        return LocalLMProxyAdapter.from_folder(
            folders["cot-sft"][0], "sft", render_history, "reasoning-first"
        )

    failed = [r for r in check_adapter(factory, n_traces=2) if not r.passed]
    assert failed == []


def test_model_folder_with_changed_weights_is_refused(folders, tmp_path):
    src = folders["instruct"][0]
    for name in ("config.json", "vocab.json", "model.pt", "card.json"):
        (tmp_path / name).write_bytes((src / name).read_bytes())
    (tmp_path / "model.pt").write_bytes((src / "model.pt").read_bytes() + b"\0")
    with pytest.raises(CheckFailed):
        load_local_lm(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "format": "hf"}))
    with pytest.raises(InputError):
        load_local_lm(tmp_path)


def test_batched_calls_equal_one_context_at_a_time(corpus, folders):
    splits, _ = corpus
    adapter = LocalLMProxyAdapter.from_folder(
        folders["cot-sft"][0], "sft", render_history, "reasoning-first"
    )
    contexts = [splits["eval"][i].context(t) for i, t in ((0, 0), (1, 5), (2, 2))]
    overrides = [None, splits["eval"][1].steps[5].r, None]
    batched = adapter.act_many(contexts, overrides)
    reports = adapter.emit_many(contexts)
    for c, r, got, rep in zip(contexts, overrides, batched, reports, strict=True):
        fresh = LocalLMProxyAdapter.from_folder(
            folders["cot-sft"][0], "sft", render_history, "reasoning-first"
        )
        assert fresh.act(c, r_override=r) == pytest.approx(got, abs=1e-6)
        assert fresh.emit_r(c).model_dump() == pytest.approx(rep.model_dump(), abs=1e-6)
