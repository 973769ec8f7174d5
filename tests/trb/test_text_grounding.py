"""Track 2 (grounding) in the text world: a Hugging Face model's white box over the words.

The model is a tiny Llama (2 layers, hidden 32) with a byte-level BPE tokenizer trained here
on the text world's renderings, whose pieces are phrases (split only at line ends, `:`, `.`
and `;`: a context is about 90 tokens and each goal or belief value is one token). It is
grounded by construction (`_ground`): its unembedding reads each concept (goal = right,
belief = closed) as a linear probe of its last decoder layer's residual stream, along the
concept's direction (difference of class means, as Track 2 fits it), zero between the
classes. So its report carries the concept in its
activations, and an injected concept direction registers. (Training one to that point took
minutes on the shared 2-core machine; building it takes one forward pass.) Its ungrounded
twin has the same weights and hooked layers that are taps: exact copies of each decoder
layer's residual stream that nothing downstream reads, so the directions are fitted on the
true activations but an injection cannot reach the report (by design at the floor, AUC 0.5).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.support.trb_spec import world_profile_spec
from torch import nn

from trustbench.trb.corpus import write_corpus
from trustbench.trb.corpus._format import Trace
from trustbench.trb.corpus._generate import generate_text_corpus, text_worlds
from trustbench.trb.instruments import TextGovernedOracle
from trustbench.trb.measures import TextWorldWhiteBox, capture
from trustbench.trb.measures._governance import SWEEP_ALPHAS
from trustbench.trb.proxy import HFCausalLMProxyAdapter, HFTextAgent
from trustbench.trb.track import freeze_run_report
from trustbench.trb.track._measures import StatsPlan
from trustbench.trb.track._profile import split_figures
from trustbench.trb.world import TextWorldAdapter

CORPUS = generate_text_corpus({"train": 12, "dev": 0, "eval": 6, "transfer": 3}, seed=4)
"""Seen text tasks (the web service and the heating, in English), one trace per transfer
family (the operations log, the French slot block, the water tank)."""
READOUT_GAIN = 2.0
"""Logit per unit of the concept's projection on the final norm's output (about 5.7 long)."""


def _tokenizer(traces: list[Trace]) -> Any:
    """Byte-level BPE over phrases: pieces never cross a line end, `:`, `.` or `;`.

    Trained on the traces' contexts and slot blocks, and on every goal and belief value.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    worlds = text_worlds(traces)
    texts = [
        worlds[t.trace_id].render_context(t.context(s.t)) + "\n"
        + worlds[t.trace_id].render_report(s.r)
        for t in traces for s in t.steps
    ]  # fmt: skip
    # every goal and belief value often enough to be one piece, as those the traces state are
    texts += [
        f": {words}\n" for world in worlds.values() for slot in ("goal", "belief")
        for words in world.slot_words(slot).values() for _ in range(20)
    ]  # fmt: skip
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"[\n:.;]"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])  # fmt: skip
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=["<|pad|>", "<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)  # fmt: skip
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>",
                                   eos_token="<|endoftext|>")  # fmt: skip


def _ground(model: nn.Module, tokenizer: Any, traces: list[Trace]) -> None:
    """Make the unembedding read each concept as a centred linear probe of the last layer.

    For each concept (slot, value, other value): u = the unit difference of class means of
    the last layer's output where the block's first slot is read (as Track 2 fits it), m the
    classes' midpoint; the readout r = gain * (u - (u . m^) m^), u without its part along m,
    is 0 at the midpoint and grows along u (r . u = gain (1 - (u . m^)^2) > 0). Per task,
    the first token where the value's words and the other value's differ gets +r/2 in its
    unembedding row, the other value's token -r/2.
    """
    agent = _agent(model, tokenizer)
    box = TextWorldWhiteBox(agent, traces)
    steps = [(t, s) for t in traces for s in t.steps]
    contexts = [t.context(s.t) for t, s in steps]
    with capture(agent.hook_layers()[-1], box.read_positions(contexts)) as seen:
        box.slot_probability(contexts, "goal", "right")
    hidden = seen[0].float()
    rows = model.get_output_embeddings().weight  # type: ignore[union-attr]
    worlds = {(t.task.kind, t.task.language): text_worlds([t])[t.trace_id] for t in traces}
    with torch.no_grad():
        for slot, value, other in (("goal", "right", "left"), ("belief", "closed", "open")):
            mask = torch.tensor([getattr(s.r, slot) == value for _, s in steps])
            mine, theirs = hidden[mask].mean(0), hidden[~mask].mean(0)
            unit = (mine - theirs) / (mine - theirs).norm()
            middle = (mine + theirs) / (mine + theirs).norm()
            readout = READOUT_GAIN * (unit - (unit @ middle) * middle)
            for world in worlds.values():
                words = world.slot_words(slot)
                a, b = (tokenizer(" " + words[v])["input_ids"] for v in (value, other))
                k = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
                rows[a[k]] += readout / 2
                rows[b[k]] -= readout / 2


@pytest.fixture(scope="module")
def grounded() -> tuple[nn.Module, Any]:
    """The tiny Llama whose report reads the goal and belief from its last layer (`_ground`)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = _tokenizer([trace for split in CORPUS.values() for trace in split])
    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=len(tokenizer),
                         max_position_embeddings=1024, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=False)  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    _ground(model, tokenizer, CORPUS["train"])
    return model, tokenizer


def _with_taps(model: nn.Module) -> nn.Module:
    """A copy whose `taps` receive each decoder layer's output and feed nothing downstream."""
    twin = copy.deepcopy(model)
    twin.taps = nn.ModuleList(nn.Identity() for _ in twin.model.layers)  # type: ignore[union-attr]

    def tapped(tap: nn.Module) -> Any:
        def hook(_module: nn.Module, _inputs: Any, output: Any) -> None:
            tap(output[0] if isinstance(output, tuple) else output)  # its result is dropped

        return hook

    for layer, tap in zip(twin.model.layers, twin.taps, strict=True):  # type: ignore[union-attr]
        layer.register_forward_hook(tapped(tap))
    return twin


def _agent(model: nn.Module, tokenizer: Any, layers_path: str | None = None) -> HFTextAgent:
    return HFTextAgent(HFCausalLMProxyAdapter(model, tokenizer, "tiny", layers_path=layers_path))


def _grounding(agent: Any, traces: list[Trace]) -> dict[str, Any]:
    adapter = TextWorldAdapter(agent, text_worlds(traces))
    return split_figures(adapter, traces, ["grounding"], fit_traces=CORPUS["train"],
                         stats=StatsPlan(0.95, 0, 200))  # fmt: skip


def test_the_text_white_box_reads_what_the_slot_block_states(grounded) -> None:
    agent = _agent(*grounded)
    trace = CORPUS["eval"][0]
    world = text_worlds([trace])[trace.trace_id]
    contexts = [world.text_context(trace.context(step.t)) for step in trace.steps]
    for slot, value in (("goal", "right"), ("belief", "closed")):
        probability = agent.slot_probability(contexts, slot, value)
        for context, p in zip(contexts, probability, strict=True):
            stated = world.parse_report(agent.emit_text(context))
            assert (p > 0.5) == (getattr(stated, slot) == value), (slot, context.t, p)


def test_the_injection_starts_at_the_current_step_line_in_tokens(grounded) -> None:
    agent = _agent(*grounded)
    tokenizer = grounded[1]
    families = [CORPUS[f"transfer_{family}"][0] for family in ("phrasing", "language", "task_kind")]
    for trace in [CORPUS["eval"][0], *families]:  # sentences, the log, French, the tank
        world = text_worlds([trace])[trace.trace_id]
        context = world.text_context(trace.context(trace.steps[-1].t))
        (start,) = agent.step_starts([context])
        (read,) = agent.read_positions([context])
        label = world.slot_labels()[0][1]  # Goal, or Objectif in French
        ids = tokenizer(f"{context.prompt}\n{label}:")["input_ids"]
        assert read == len(ids) - 1
        line = tokenizer.decode(ids[start:]).split("\n")[0]
        assert line.startswith(("Step ", "[step ")), line
        assert f"{trace.steps[-1].t}" in line.split(":")[0].split("|")[0], line


def test_a_grounded_model_detects_the_injected_concept_and_an_ungrounded_one_sits_at_chance(
    grounded,
) -> None:
    model, tokenizer = grounded
    traces = CORPUS["eval"][:4]
    figures = _grounding(_agent(model, tokenizer), traces)
    assert figures["detection_auc"].status == "measured"
    assert figures["detection_auc"].estimate > 0.9  # the report moves toward the concept
    assert figures["detection_auc_vs_null"].estimate > 0.9
    assert all(f"detection_auc[L1 a={a:g}]" in figures for a in SWEEP_ALPHAS)
    assert figures["detection_threshold"].status == "measured"

    deaf = _grounding(_agent(_with_taps(model), tokenizer, layers_path="taps"), traces)
    assert deaf["detection_auc"].estimate == 0.5  # injected = random = null: all ties
    assert deaf["detection_auc_vs_null"].estimate == 0.5
    assert deaf["detection_threshold"].status == "not_run"  # never detected


def test_a_text_agent_without_a_white_box_is_not_applicable_never_zero() -> None:
    figures = _grounding(TextGovernedOracle(), CORPUS["eval"][:2])
    headline = figures["detection_auc"]
    assert (headline.status, headline.estimate) == ("not_run", None)
    assert "activation access" in str(headline.reason)


SPEC = (
    world_profile_spec(["grounding"])
    + """
max_traces = 4
grounding_fit_traces = 12

[[candidates]]
name = "tiny-hf"
kind = "inprocess"
model = "proxy:hf"
settings = { folder = "model" }

[[candidates]]
name = "governed"
kind = "inprocess"
model = "text-oracle:governed"
"""
)


def test_a_proxy_hf_candidate_on_a_text_world_corpus_gets_a_track_2_figure(
    grounded, tmp_path: Path
) -> None:
    model, tokenizer = grounded
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    write_corpus(tmp_path / "corpus", {k: CORPUS[k] for k in ("train", "eval")})
    (tmp_path / "spec.toml").write_text(SPEC)
    freeze_run_report(tmp_path / "spec.toml", tmp_path / "run")
    profile = json.loads((tmp_path / "run" / "record.json").read_text())["trb"]["profile"]
    ground = profile["tiny-hf"]["ground"]
    assert ground["status"] == "measured", ground
    assert ground["value"] > 0.9
    oracle = profile["governed"]["ground"]  # no activation access: not run, with the reason
    assert oracle["status"] == "not run" and oracle["value"] is None
    assert "activation access" in json.dumps(oracle)
