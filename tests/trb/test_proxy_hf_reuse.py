"""The HF adapter's fast paths (prefix reuse, logits at read positions, deduplication) equal
the earlier slow arithmetic (`tests/support/hf_reference.py`) on tiny random models built here:
a GPT-2 whose word-level tokenizer splits at `=` (every option three tokens) and a Llama (RoPE
positions) with a byte-level BPE that writes digits one by one (`conf=1` begins `conf=10`, so
the confidence slot is scored as whole words)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers", reason="transformers is not installed (trustbench[hf])")
pytest.importorskip("tokenizers", reason="tokenizers is not installed")

from tests.support.hf_reference import ReferenceHFAdapter

from trustbench.trb.adapter._protocol import ACTIONS
from trustbench.trb.corpus import generate_split
from trustbench.trb.proxy import HFCausalLMProxyAdapter
from trustbench.trb.proxy import _hf as _hf_batch
from trustbench.trb.proxy._local import RENAMED, STANDARD, render_slots
from trustbench.trb.reference._token_world import documents, vocabulary

TOLERANCE = 1e-6


def _subword_gpt2(split_on_equals=True):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = vocabulary()
    pieces = ["=", *[w for w in words if "=" not in w]]
    pieces += [p for w in words for p in w.split("=") if p] if split_on_equals else words
    ids = {w: i for i, w in enumerate(dict.fromkeys(pieces))}
    tok = Tokenizer(models.WordLevel(ids, unk_token="<unk>"))
    split = [pre_tokenizers.Split("=", behavior="isolated")] if split_on_equals else []
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), *split])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>",
                                   bos_token="<bos>", eos_token="<eos>")  # fmt: skip
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=len(ids), n_positions=256,
                        initializer_range=0.3, pad_token_id=ids["<pad>"])  # fmt: skip
    return GPT2LMHeadModel(config).eval(), fast


def _bpe_llama():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|pad|>", "<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)  # fmt: skip
    texts = [" ".join(d) for d in documents(generate_split("train", 20, seed=3), ("cot",))]
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>",
                                   eos_token="<|endoftext|>")  # fmt: skip
    torch.manual_seed(1)
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=len(fast),
                         max_position_embeddings=1024, initializer_range=0.3,
                         pad_token_id=fast.pad_token_id,
                         eos_token_id=fast.eos_token_id)  # fmt: skip
    return LlamaForCausalLM(config).eval(), fast


@pytest.fixture(scope="module", params=["gpt2-subword", "llama-bpe"])
def lm(request):
    return _subword_gpt2() if request.param == "gpt2-subword" else _bpe_llama()


@pytest.fixture(scope="module")
def llama():
    return _bpe_llama()


@pytest.fixture(scope="module")
def contexts():
    traces = generate_split("eval", 4, seed=11)
    return [trace.context(step.t) for trace in traces for step in trace.steps[:2]]


def _pair(lm, encoding=STANDARD):
    fast = HFCausalLMProxyAdapter(*lm, "fast")
    slow = ReferenceHFAdapter(*lm, "slow")
    if encoding is not STANDARD:
        fast.use_encoding(encoding)
        slow.use_encoding(encoding)
    return fast, slow


def _assert_reports_equal(got, want):
    for a, b in zip(got, want, strict=True):
        assert a.model_dump(exclude={"confidence", "caused_by_self"}) == b.model_dump(
            exclude={"confidence", "caused_by_self"}
        )
        assert a.confidence == pytest.approx(b.confidence, abs=TOLERANCE)
        assert (a.caused_by_self is None) == (b.caused_by_self is None)
        if a.caused_by_self is not None:
            assert a.caused_by_self == pytest.approx(b.caused_by_self, abs=TOLERANCE)


def _assert_distributions_equal(got, want):
    for a, b in zip(got, want, strict=True):
        assert [a[x] for x in ACTIONS] == pytest.approx([b[x] for x in ACTIONS], abs=TOLERANCE)


def test_batched_and_single_reports_equal_the_slot_by_slot_reference(lm, contexts):
    fast, slow = _pair(lm)
    want = slow.emit_many(contexts)
    assert len({r.model_dump_json() for r in want}) > 1  # the reports differ between contexts
    _assert_reports_equal(fast.emit_many(contexts), want)
    _assert_reports_equal([_pair(lm)[0].emit_r(c) for c in contexts[:3]], want[:3])


def test_reports_of_a_word_level_model_equal_the_reference(contexts):
    # Every option one token and no shared start: each slot pass holds one token per option.
    fast, slow = _pair(_subword_gpt2(split_on_equals=False))
    assert all(len(fast.tokens([w])) == 1 for w in STANDARD.options["conf"])
    _assert_reports_equal(fast.emit_many(contexts), slow.emit_many(contexts))


def test_reports_in_the_renamed_encoding_equal_the_reference(llama, contexts):
    # RENAMED lists the self slot before belief: at step 0 its unscored `na` row is continued.
    fast, slow = _pair(llama, RENAMED)
    assert list(RENAMED.order).index("self") < len(RENAMED.order) - 1
    _assert_reports_equal(fast.emit_many(contexts), slow.emit_many(contexts))


def test_actions_with_and_without_overrides_equal_the_reference(lm, contexts):
    fast, slow = _pair(lm)
    reports = slow.emit_many(contexts)
    other = {"left": "right", "stay": "left", "right": "left"}
    flipped = [r.model_copy(update={"planned_next": other[r.planned_next]}) for r in reports]
    overrides = [None, *reports, *flipped]
    batch = [contexts[0], *contexts, *contexts]
    _assert_distributions_equal(fast.act_many(batch, overrides), slow.act_many(batch, overrides))
    fast, slow = _pair(lm)
    want = [slow.act(c, r_override=r) for c, r in zip(contexts, flipped, strict=True)]
    got = [fast.act(c, r_override=r) for c, r in zip(contexts, flipped, strict=True)]
    _assert_distributions_equal(got, want)
    _assert_distributions_equal(fast.act_without_r_many(contexts),
                                slow.act_without_r_many(contexts))  # fmt: skip


def _count_passes(monkeypatch):
    shapes: list[tuple[int, ...]] = []
    original = _hf_batch.forward

    def counted(model, ids, mask, **named):
        logits, cache = original(model, ids, mask, **named)
        shapes.append(tuple(logits.shape))
        return logits, cache

    monkeypatch.setattr(_hf_batch, "forward", counted)
    return shapes


def test_one_report_costs_a_pass_per_slot_or_slot_pair_the_first_with_the_prompt(
    llama, contexts, monkeypatch
):
    fast, slow = _pair(llama)
    ReferenceHFAdapter.passes = 0
    slow.emit_r(contexts[4])
    passes = _count_passes(monkeypatch)
    fast.emit_r(contexts[4])
    # The prompt with goal and belief (2 x 2 rows) after it; plan; conf; self.
    assert len(passes) == len(STANDARD.order) - 1
    assert ReferenceHFAdapter.passes > 2 * len(passes)  # the chain ran one pass per option


def test_identical_contexts_are_filled_once(llama, contexts, monkeypatch):
    fast = HFCausalLMProxyAdapter(*llama, "fast")
    passes = _count_passes(monkeypatch)
    fast.emit_many([contexts[4]])
    single = list(passes)
    passes.clear()
    again = HFCausalLMProxyAdapter(*llama, "again")
    reports = again.emit_many([contexts[4]] * 5)
    assert passes == single  # same passes, same rows: the copies cost nothing
    assert len({r.model_dump_json() for r in reports}) == 1


def test_logits_are_computed_only_at_each_prompt_s_last_position(llama, contexts, monkeypatch):
    fast = HFCausalLMProxyAdapter(*llama, "fast")
    reports = fast.emit_many(contexts)
    passes = _count_passes(monkeypatch)
    fast.act_many(contexts, reports)
    lengths = [len(fast.tokens([*fast._render(c.observations), *render_slots(r), "<act>"]))
               for c, r in zip(contexts, reports, strict=True)]  # fmt: skip
    # The prompts' pass has logits at the distinct last positions only, not at every position
    # (a second pass over the cache scores the actions this small BPE spells in pieces).
    assert passes[0] == (len(contexts), len(set(lengths)), len(fast.tokenizer))
    assert len(set(lengths)) < max(lengths)


def test_with_forward_hooks_every_pass_keeps_one_whole_row_per_context(llama, contexts):
    fast, slow = _pair(llama)
    rows: list[int] = []
    layer = fast.hook_layers()[0]
    handle = layer.register_forward_hook(
        lambda _m, _i, out: rows.append((out[0] if isinstance(out, tuple) else out).shape[0])
    )
    try:
        got = fast.emit_many(contexts[:4])
    finally:
        handle.remove()
    assert rows and set(rows) == {4}
    _assert_reports_equal(got, slow.emit_many(contexts[:4]))
