from __future__ import annotations

import json
import socket
import sys
import textwrap

import pytest
import torch
from typer.testing import CliRunner

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (optional extra: trustbench[hf])"
)
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed")

from trustbench.cli import app  # noqa: E402
from trustbench.errors import InputError  # noqa: E402
from trustbench.trb.adapter import check_adapter  # noqa: E402
from trustbench.trb.adapter._protocol import ACTIONS  # noqa: E402
from trustbench.trb.corpus import generate_split  # noqa: E402
from trustbench.trb.measures import capture, inject  # noqa: E402
from trustbench.trb.measures._governance import SWEEP_ALPHAS  # noqa: E402
from trustbench.trb.proxy import HFCausalLMProxyAdapter, load_hf_causal_lm  # noqa: E402
from trustbench.trb.proxy._local import (  # noqa: E402
    RENAMED,
    SLOT_OPTIONS,
    STANDARD,
    SlotEncodingUnsupported,
    render_slots,
)
from trustbench.trb.reference._token_world import render_history, vocabulary  # noqa: E402
from trustbench.trb.track._measures import StatsPlan  # noqa: E402
from trustbench.trb.track._profile import split_figures  # noqa: E402


def _save_tiny_gpt2(folder, vocab, split_on_equals=False):
    """A randomly initialised 2-layer GPT-2 and a word-level tokenizer, saved by path."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    ids = {w: i for i, w in enumerate(vocab)}
    tok = Tokenizer(models.WordLevel(ids, unk_token="<unk>"))
    pre = [pre_tokenizers.WhitespaceSplit()]
    if split_on_equals:  # "conf=10" -> "conf", "=", "10": options span several tokens
        pre.append(pre_tokenizers.Split("=", behavior="isolated"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(pre)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
    )
    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=2,
        n_embd=32,
        n_head=2,
        vocab_size=len(vocab),
        n_positions=128,
        bos_token_id=ids["<bos>"],
        eos_token_id=ids["<eos>"],
        pad_token_id=ids["<pad>"],
    )
    GPT2LMHeadModel(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def _save_tiny_gpt2_byte_bpe(folder, traces):
    """GPT-2 with a small byte-level BPE (leading-space markers, digits one by one)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    from trustbench.trb.reference._token_world import documents

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|pad|>", "<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([" ".join(d) for d in documents(traces, ("cot",))], trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|endoftext|>"
    )
    torch.manual_seed(1)
    config = GPT2Config(
        n_layer=2,
        n_embd=32,
        n_head=2,
        vocab_size=len(fast),
        n_positions=512,
        bos_token_id=fast.eos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
    )
    GPT2LMHeadModel(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def _pieces(words):
    out = ["=", *[w for w in words if "=" not in w]]
    for w in words:
        out += [p for p in w.split("=") if p]
    return list(dict.fromkeys(out))


@pytest.fixture(scope="module")
def word_model(tmp_path_factory):
    return _save_tiny_gpt2(tmp_path_factory.mktemp("hf-word"), vocabulary())


@pytest.fixture(scope="module")
def subword_model(tmp_path_factory):
    return _save_tiny_gpt2(
        tmp_path_factory.mktemp("hf-subword"), _pieces(vocabulary()), split_on_equals=True
    )


@pytest.fixture(scope="module")
def bpe_model(tmp_path_factory):
    return _save_tiny_gpt2_byte_bpe(
        tmp_path_factory.mktemp("hf-bpe"), generate_split("train", 20, seed=3)
    )


@pytest.fixture(scope="module")
def adapter(word_model):
    return HFCausalLMProxyAdapter.from_path(word_model, "tiny-gpt2")


@pytest.fixture(scope="module")
def traces():
    return generate_split("train", 24, seed=5)


def _logprobs(model, tok, text):
    ids = torch.tensor([tok(text)["input_ids"]])
    with torch.no_grad():
        return torch.log_softmax(model(input_ids=ids).logits[0].double(), -1), ids[0]


def test_act_returns_exact_option_probabilities_renormalised_over_the_actions(adapter, traces):
    context, r = traces[0].context(2), traces[0].steps[2].r
    words = [*render_history(context.observations), *render_slots(r), "<act>"]
    logp, _ = _logprobs(adapter.model, adapter.tokenizer, " ".join(words))
    ids = [adapter.tokenizer.convert_tokens_to_ids(a) for a in ACTIONS]
    p = logp[-1, ids].exp()
    want = dict(zip(ACTIONS, (p / p.sum()).tolist(), strict=True))
    got = adapter.act(context, r_override=r)
    # The adapter computes logits at the read position only: a float32 product of another
    # shape, equal to the full forward's to rounding (about 1e-9 here).
    assert got == pytest.approx(want, abs=1e-8)
    assert sum(got.values()) == pytest.approx(1.0, abs=1e-12)
    assert 0 < adapter.last_off_option_mass < 1  # a random model puts mass elsewhere too


def test_multi_token_options_chain_token_log_probabilities(subword_model, traces):
    lm = HFCausalLMProxyAdapter.from_path(subword_model, "subword")
    prompt = [*lm.prompt_for_report(traces[1].context(1)), "goal=left", "belief=open", "plan=stay"]
    options = SLOT_OPTIONS["conf"]
    want = []
    for option in options:
        logp, ids = _logprobs(lm.model, lm.tokenizer, " ".join([*prompt, option]))
        n = len(lm.tokens(prompt))
        assert len(ids) - n == 3  # "conf", "=", "k": the chain is exercised
        want.append(sum(float(logp[j - 1, ids[j]]) for j in range(n, len(ids))))
    p = torch.tensor(want).exp()
    got = lm.next_option_probs([prompt], options)[0]
    # float32 forward passes of different lengths agree to ~1e-7, not bit for bit.
    assert got.tolist() == pytest.approx((p / p.sum()).tolist(), abs=1e-6)
    report = lm.emit_r(traces[1].context(1))
    assert 0.0 <= report.confidence <= 1.0


def test_options_whose_tokens_begin_another_are_scored_as_whole_words(bpe_model, traces):
    lm = HFCausalLMProxyAdapter.from_path(bpe_model, "bpe")
    prompt = [*lm.prompt_for_report(traces[1].context(1)), "goal=left", "belief=open", "plan=stay"]
    options = SLOT_OPTIONS["conf"]
    one, ten = lm._split(prompt, "conf=1")[1], lm._split(prompt, "conf=10")[1]
    assert ten[: len(one)] == one  # the case the boundary term exists for
    tok = lm.tokenizer
    # A new word starts with whitespace: space, newline, tab (Ġ, Ċ, ĉ in byte-level BPE).
    white = ("Ġ", "Ċ", "ĉ")
    starts = [i for i in range(len(tok)) if tok.convert_ids_to_tokens(i).startswith(white)]
    starts.append(tok.eos_token_id)
    want = []
    for option in options:
        logp, ids = _logprobs(lm.model, tok, " ".join([*prompt, option]))
        n = len(lm.tokens(prompt))
        chain = sum(float(logp[j - 1, ids[j]]) for j in range(n, len(ids)))
        want.append(chain + float(torch.logsumexp(logp[-1, starts], -1)))
    p = torch.tensor(want).exp()
    got = lm.next_option_probs([prompt], options)[0]
    assert got.tolist() == pytest.approx((p / p.sum()).tolist(), abs=1e-6)


def test_byte_level_bpe_adapter_passes_the_conformance_kit(bpe_model):
    lm = lambda: HFCausalLMProxyAdapter.from_path(bpe_model, "bpe")  # noqa: E731
    assert [r for r in check_adapter(lm, n_traces=2) if not r.passed] == []


def test_prefix_options_under_a_tokenizer_without_word_marks_are_refused(adapter, traces):
    prompt = adapter.prompt_for_report(traces[0].context(0))
    with pytest.raises(InputError, match="prefix"):
        adapter.next_option_probs([prompt], ["goal=left", "goal=left belief=open"])


def test_option_outside_the_vocabulary_is_refused_not_scored_as_unknown(adapter, traces):
    prompt = adapter.prompt_for_report(traces[0].context(0))
    with pytest.raises(InputError, match="outside the tokenizer's vocabulary"):
        adapter.next_option_probs([prompt], ["goal=left", "goal=up"])


def test_override_changes_only_the_slot_span_of_the_token_ids(adapter, traces):
    rows = []
    original = adapter._run_rows
    adapter._run_rows = lambda r, *more, **named: rows.append(r) or original(r, *more, **named)
    try:
        context = traces[2].context(3)
        own = adapter.emit_r(context)
        flipped = own.model_copy(update={"goal": "left" if own.goal == "right" else "right"})
        rows.clear()
        adapter.act(context, r_override=own)
        adapter.act(context, r_override=flipped)
    finally:
        del adapter._run_rows
    a, b = rows[0][0], rows[1][0]
    diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    assert len(a) == len(b) and len(diff) == 1
    assert adapter.tokenizer.convert_ids_to_tokens(b[diff[0]]) == f"goal={flipped.goal}"
    assert adapter.act(context, r_override=own) != adapter.act(context, r_override=flipped)


def test_hf_adapter_passes_the_conformance_kit(word_model):
    failed = [
        r
        for r in check_adapter(lambda: HFCausalLMProxyAdapter.from_path(word_model), n_traces=2)
        if not r.passed
    ]
    assert failed == []


def test_cli_check_adapter_passes_the_hf_adapter_loaded_by_path(word_model, tmp_path, monkeypatch):
    (tmp_path / "hf_factory_under_test.py").write_text(
        textwrap.dedent(
            """
            import os
            from trustbench.trb.proxy import HFCausalLMProxyAdapter

            def factory():
                return HFCausalLMProxyAdapter.from_path(os.environ["HF_TEST_MODEL"])
            """
        )
    )
    monkeypatch.setenv("HF_TEST_MODEL", str(word_model))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "hf_factory_under_test", raising=False)
    result = CliRunner().invoke(
        app, ["trb", "check-adapter", "hf_factory_under_test:factory", "--traces", "2"]
    )
    assert result.exit_code == 0, result.output


def test_white_box_hooks_reach_the_hf_decoder_blocks(adapter, traces):
    blocks = adapter.hook_layers()
    assert blocks == list(adapter.model.transformer.h)
    contexts = [t.context(1) for t in traces[:4]]
    positions = adapter.read_positions(contexts)
    for c, pos in zip(contexts, positions, strict=True):
        ids = adapter.tokens(adapter.prompt_for_report(c))
        assert adapter.tokenizer.convert_ids_to_tokens(ids[pos]) == "<r>"
    with capture(blocks[-1], positions) as seen:
        base = adapter.slot_probability(contexts, "goal", "right")
    assert seen[0].shape == (4, 32)
    push = torch.full((4, 32), 50.0)
    with inject(blocks[-1], push, adapter.step_starts(contexts)):
        moved = adapter.slot_probability(contexts, "goal", "right")
    assert abs(moved - base).max() > 1e-6  # the hook reaches the report's forward pass


def test_grounding_runs_on_the_hf_model_through_block_hooks(adapter, traces, eval_traces):
    result = _grounding(adapter, traces, eval_traces[:12], resamples=50)
    for layer in (0, 1):  # two hooked blocks, each swept at every strength
        assert all(f"detection_auc[L{layer} a={a:g}]" in result for a in SWEEP_ALPHAS)
    assert 0.0 <= result["detection_auc"].estimate <= 1.0


def _grounding(adapter, fit, traces, *, resamples):
    """Track 2's figures (the `grounding` measure) by bare name, whatever the traces' split."""
    figures = split_figures(
        adapter, traces, ["grounding"], fit_traces=fit, stats=StatsPlan(0.95, 0, resamples)
    )
    return {name.removeprefix(f"{traces[0].split}."): f for name, f in figures.items()}


def test_missing_folder_is_refused_naming_the_path(tmp_path):
    missing = tmp_path / "no-model-here"
    with pytest.raises(InputError, match="no such model folder") as error:
        HFCausalLMProxyAdapter.from_path(missing)
    assert str(missing) in str(error.value)


def test_hub_repo_id_is_never_taken_for_a_download(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="nothing is downloaded"):
        load_hf_causal_lm("gpt2")


def test_model_that_is_not_a_causal_lm_is_refused(tmp_path):
    from transformers import DistilBertConfig

    DistilBertConfig(n_layers=1, dim=16, hidden_dim=32, n_heads=2).save_pretrained(tmp_path)
    with pytest.raises(InputError, match="not a causal LM") as error:
        load_hf_causal_lm(tmp_path)
    assert str(tmp_path) in str(error.value)


def test_folder_without_a_config_is_refused(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(InputError, match=r"lacks config\.json"):
        load_hf_causal_lm(tmp_path)


def test_missing_transformers_is_an_input_error_with_the_install_hint(word_model, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import now raises ImportError
    with pytest.raises(InputError, match=r"\[hf\]") as error:
        load_hf_causal_lm(word_model)
    assert str(word_model) in str(error.value)


def test_loading_by_path_opens_no_network_connection(word_model, monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("network access while loading a local model")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    model, tokenizer = load_hf_causal_lm(word_model)
    assert json.loads((word_model / "config.json").read_text())["n_layer"] == 2
    assert tokenizer("<bos> <r>")["input_ids"] == [
        vocabulary().index("<bos>"),
        vocabulary().index("<r>"),
    ]
    assert model.config.n_layer == 2


def test_prompt_longer_than_the_model_positions_is_refused(word_model, traces):
    lm = HFCausalLMProxyAdapter.from_path(word_model)
    lm.model.config.n_positions = 8  # the history alone is longer than this
    with pytest.raises(InputError, match="exceeds the model's 8 positions"):
        lm.emit_r(traces[0].context(2))


def test_unknown_architecture_needs_a_layers_path_and_accepts_one(adapter):
    from torch import nn

    from trustbench.trb.proxy._hf import decoder_layers

    class Wrapped(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

    wrapped = Wrapped(adapter.model)
    with pytest.raises(InputError, match="layers_path"):
        decoder_layers(wrapped)
    assert decoder_layers(wrapped, "inner.transformer.h") == list(adapter.model.transformer.h)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_reduced_precision_weights_load_on_cpu_and_give_close_float64_probabilities(
    word_model, traces, dtype
):
    full = HFCausalLMProxyAdapter.from_path(word_model, "fp32")
    half = HFCausalLMProxyAdapter.from_path(word_model, dtype, dtype=dtype)
    assert next(half.model.parameters()).dtype == getattr(torch, dtype)
    context = traces[0].context(1)
    p32, p16 = full.act(context, None), half.act(context, None)
    assert all(isinstance(v, float) for v in p16.values())
    assert abs(sum(p16.values()) - 1) < 1e-9  # renormalised in float64 whatever the weights
    # Reduced precision changes the model's numbers a little, not the harness's arithmetic.
    assert max(abs(p32[a] - p16[a]) for a in ACTIONS) < 0.05


def test_cuda_requested_without_cuda_is_an_input_error_naming_the_device(word_model, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(InputError, match="sees no CUDA device") as caught:
        HFCausalLMProxyAdapter.from_path(word_model, device="cuda")
    assert "(device)" in str(caught.value)


@pytest.mark.parametrize(("device", "dtype"), [("tpu", "float32"), ("cpu", "int8")])
def test_unknown_device_or_dtype_is_refused_before_loading(word_model, device, dtype):
    with pytest.raises(InputError, match=r"device|dtype"):
        load_hf_causal_lm(word_model, device=device, dtype=dtype)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_bfloat16_adapter_matches_cpu_float32(word_model, traces):
    cpu = HFCausalLMProxyAdapter.from_path(word_model, "cpu")
    gpu = HFCausalLMProxyAdapter.from_path(word_model, "gpu", device="cuda", dtype="bfloat16")
    context = traces[0].context(1)
    a, b = cpu.act(context, None), gpu.act(context, None)
    assert max(abs(a[k] - b[k]) for k in ACTIONS) < 0.05
    grounded = _grounding(gpu, traces[:6], traces[6:12], resamples=20)
    assert grounded["detection_auc"].status == "measured"


def test_a_word_level_hf_tokenizer_without_the_renamed_words_refuses_that_encoding(word_model):
    adapter = HFCausalLMProxyAdapter.from_path(word_model, "tiny-gpt2")
    with pytest.raises(SlotEncodingUnsupported, match="vocabulary lacks 21 word"):
        adapter.use_encoding(RENAMED)
    assert adapter.encoding is STANDARD


def test_a_subword_hf_model_is_asked_in_the_renamed_encoding_word_by_word(bpe_model, traces):
    adapter = HFCausalLMProxyAdapter.from_path(bpe_model, "tiny-bpe")
    adapter.use_encoding(RENAMED)  # byte-level BPE spells any word
    context = traces[0].context(1)
    prompts, probs = adapter.fill_slots([context])
    filled = prompts[0][-len(RENAMED.order) :]
    assert [w.split("=")[0] for w in filled] == [RENAMED.keys[s] for s in RENAMED.order]
    assert probs["conf"].shape == (1, 11)  # certainty=10 vs =100: scored as whole words
    assert adapter.emit_r(context).caused_by_self is not None


def test_hf_continuation_log_probability_chains_its_subword_tokens_and_feeds_g_llr(
    subword_model, traces
):
    """Track 1's open-ended hook on the HF proxy: a multi-token text scored token by token,
    as one forward pass of the joined text reads it; G_llr over stored edits is measured."""
    from trustbench.trb.measures import LlrIntervention, llr_governance

    adapter = HFCausalLMProxyAdapter.from_path(subword_model, "tiny-subword")
    model, tok = load_hf_causal_lm(subword_model)
    step = traces[0].steps[1]
    context, r_prime = traces[0].context(step.t), step.counterfactuals[0].r_prime
    prompt, text = adapter.act_prompt(context, r_prime), "plan=left right"
    logp, ids = _logprobs(model, tok, " ".join([*prompt, text]))
    start = len(tok(" ".join(prompt))["input_ids"]) - 1
    assert len(ids) - 1 - start == 4  # "plan", "=", "left", "right"
    expected = float(sum(logp[j, ids[j + 1]] for j in range(start, len(ids) - 1)))
    assert adapter.continuation_logprob(context, r_prime, text) == pytest.approx(expected, abs=1e-9)
    items = [
        LlrIntervention(t.trace_id, t.context(s.t), s.r, cf.r_prime, cf.r_prime.planned_next)
        for t in traces[:3] for s in t.steps[:1] for cf in s.counterfactuals[:2]
    ]  # fmt: skip
    figure = llr_governance(adapter, items, resamples=100)
    assert figure.status == "measured" and figure.estimate is not None


def test_a_proxy_hf_candidates_device_and_dtype_are_known_settings_and_a_typo_still_warns(
    tmp_path, word_model
):
    """The HF text agent reads `device` and `dtype`: freeze warns of `devcie`, not of those."""
    from tests.support.cli import invoke

    from trustbench.trb.corpus import write_corpus
    from trustbench.trb.corpus._generate import generate_text_split

    write_corpus(tmp_path / "corpus", {"eval": generate_text_split("eval", 1, seed=5)})
    (tmp_path / "spec.toml").write_text(
        'suite = "trb"\ntrack = "profile"\nconcurrency = 1\n[corpus]\npath = "corpus"\n'
        '[track_options]\nmeasures = ["governance"]\nsplits = ["eval"]\n'
        '[[candidates]]\nname = "tiny"\nkind = "inprocess"\nmodel = "proxy:hf"\n'
        f'settings = {{ folder = "{word_model}", device = "cpu", dtype = "float32", '
        'devcie = "cpu" }\n',
        encoding="utf-8",
    )
    code, output = invoke("freeze", str(tmp_path / "spec.toml"), "--out", str(tmp_path / "run"))
    assert code == 0, output
    warnings = [" ".join(w.split()) for w in output.split("warning: ")[1:]]
    assert len(warnings) == 1, warnings  # folder, device and dtype are read: no warning
    assert "settings key 'devcie' is not a known" in warnings[0]
    assert "did you mean 'device'?" in warnings[0]
