"""A token version of the reference world and the small causal LMs trained on it here.

The windy corridor is rendered as words, so a causal language model can play it through
the same proxy recipe a chat model gets: observations, then (optionally) a slot block of
stated reasoning, then the action.

    <bos> | p3 s6 cue=right door=open | p4 s5 gust=none did=right
          <r> goal=right ... </r> <act> right

Three document kinds are cut from the train split (the r snapshot and the action of every
step; eval and transfer traces are refused by hash):

- report:  `<bos> obs <r> slots </r> <eos>`  (say what you believe; no action)
- action:  `<bos> obs <act> a <eos>`          (act; no reasoning)
- cot:     `<bos> obs <r> slots </r> <act> a <eos>` (reasoning text, then the action)

Recipes (spec §4 baselines 1-3, at one model size): `instruct` is trained on report and
action documents, so it can state r and act but has never seen reasoning precede an action;
the CoT-prompted baseline uses the same weights with a reasoning-first template; `cot-sft`
continues training the instruct weights on cot documents (CoT-supervised finetune). The loss
is next-token cross-entropy on the completion only (after `<r>` or `<act>`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from pydantic import BaseModel, Field, StrictFloat, StrictInt

from trustbench._docstrings import documented
from trustbench.trb.adapter._protocol import ACTIONS, DOOR_STATES, GOALS, GUSTS, Observation
from trustbench.trb.corpus._format import CorpusManifest, Trace, canonical_sha256, trace_sha256
from trustbench.trb.corpus._store import assert_trainable
from trustbench.trb.proxy._causal_lm import (
    TinyCausalLM,
    WordTokenizer,
    load_local_lm,
    save_local_lm,
)
from trustbench.trb.proxy._local import CLOSE, OPEN, SLOT_OPTIONS, render_slots
from trustbench.trb.reference import cache_dir

_LOG = logging.getLogger(__name__)

MAX_CELLS = 16
"""Position and steps-left words exist up to here, so larger transfer worlds still tokenize
(their unseen words keep untrained embeddings: an honest out-of-distribution test)."""
SPECIAL = ("<pad>", "<unk>", "<bos>", "<eos>", "<act>", "|", OPEN, CLOSE)

Recipe = Literal["instruct", "cot-sft"]


def vocabulary() -> list[str]:
    """The token world's words, in id order."""
    words = list(SPECIAL)
    words += [f"p{i}" for i in range(MAX_CELLS)] + [f"s{i}" for i in range(MAX_CELLS + 1)]
    words += [f"cue={g}" for g in GOALS] + [f"door={d}" for d in DOOR_STATES]
    words += [f"gust={g}" for g in GUSTS] + [f"did={a}" for a in ACTIONS]
    for options in SLOT_OPTIONS.values():
        words += list(options)
    return words + list(ACTIONS)


def render_observation(obs: Observation) -> list[str]:
    """One step's observation as words (cues at step 0, felt gust and own move later)."""
    shown = (("cue", obs.goal_cue), ("door", obs.door_cue), ("gust", obs.last_gust),
             ("did", obs.last_action))  # fmt: skip
    return ["|", f"p{obs.position}", f"s{obs.steps_left}"] + [
        f"{word}={value}" for word, value in shown if value is not None
    ]


def render_history(observations: tuple[Observation, ...]) -> list[str]:
    """`<bos>` and every observation so far."""
    words = ["<bos>"]
    for obs in observations:
        words += render_observation(obs)
    return words


def documents(traces: list[Trace], kinds: tuple[str, ...]) -> list[list[str]]:
    """Training documents of the given kinds, one per step per kind."""
    docs: list[list[str]] = []
    for trace in traces:
        for step in trace.steps:
            history = render_history(trace.context(step.t).observations)
            slots = render_slots(step.r)
            if "report" in kinds:
                docs.append([*history, *slots, "<eos>"])
            if "action" in kinds:
                docs.append([*history, "<act>", step.action, "<eos>"])
            if "cot" in kinds:
                docs.append([*history, *slots, "<act>", step.action, "<eos>"])
    return docs


class TokenLMConfig(BaseModel):
    """Size and training of one token-world LM (all part of the cache key)."""

    model_config = documented(extra="forbid", frozen=True)

    d_model: StrictInt = Field(default=48, ge=8)
    """Residual width."""
    n_layers: StrictInt = Field(default=2, ge=1)
    """Transformer blocks."""
    n_heads: StrictInt = Field(default=4, ge=1)
    """Attention heads."""
    max_len: StrictInt = Field(default=80, ge=16)
    """Longest sequence."""
    epochs: StrictInt = Field(default=5, ge=1)
    """Passes over the instruct documents."""
    finetune_epochs: StrictInt = Field(default=3, ge=1)
    """Passes over the cot documents when finetuning (cot-sft)."""
    batch_size: StrictInt = Field(default=128, ge=1)
    """Documents per step."""
    learning_rate: StrictFloat = Field(default=3e-3, gt=0)
    """Adam step size."""
    seed: StrictInt = 0
    """Seeds initialisation and batch order."""
    threads: StrictInt = Field(default=1, ge=1)
    """torch CPU threads."""


def _batch_tensors(docs: list[list[str]], tok: WordTokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids and a mask of completion targets (tokens after `<r>` / `<act>`)."""
    width = max(len(d) for d in docs)
    ids = torch.full((len(docs), width), tok.pad, dtype=torch.long)
    target = torch.zeros((len(docs), width), dtype=torch.bool)
    for i, doc in enumerate(docs):
        ids[i, : len(doc)] = torch.tensor(tok(" ".join(doc)))
        start = next(k for k, w in enumerate(doc) if w in (OPEN, "<act>"))
        target[i, start + 1 : len(doc)] = True
    return ids, target


def _fit(
    model: TinyCausalLM, docs: list[list[str]], tok: WordTokenizer, epochs: int, cfg: TokenLMConfig
) -> float:
    ids, target = _batch_tensors(docs, tok)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate)
    gen = torch.Generator().manual_seed(cfg.seed)
    last = float("nan")
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(docs), generator=gen)
        for start in range(0, len(docs), cfg.batch_size):
            idx = order[start : start + cfg.batch_size]
            x, m = ids[idx], target[idx]
            logits = model(x[:, :-1])
            # Position k predicts token k+1; only completion tokens are scored.
            loss = F.cross_entropy(logits[m[:, 1:]], x[:, 1:][m[:, 1:]])
            opt.zero_grad()
            loss.backward()
            opt.step()
            last = float(loss.detach())
    model.eval()
    return last


def train_token_lm(
    traces: list[Trace],
    manifest: CorpusManifest,
    recipe: Recipe,
    cfg: TokenLMConfig,
    start_from: TinyCausalLM | None = None,
) -> tuple[TinyCausalLM, WordTokenizer, dict[str, Any]]:
    """Train one token-world LM by recipe.

    Args:
        traces: Train split (held-out traces are refused by hash).
        manifest: Corpus manifest.
        recipe: `instruct` (report + action documents from initialisation) or `cot-sft`
            (cot documents, continuing from `start_from`, the instruct model).
        cfg: Size and training config.
        start_from: The instruct weights a `cot-sft` run finetunes (required for it).
    """
    assert_trainable(traces, manifest)
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    tok = WordTokenizer(vocabulary())
    model = TinyCausalLM(len(tok.vocab), cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.max_len)
    started = time.perf_counter()
    summary: dict[str, Any] = {"recipe": recipe, "train_traces": len(traces)}
    if recipe == "instruct":
        summary["final_batch_loss"] = _fit(
            model, documents(traces, ("report", "action")), tok, cfg.epochs, cfg
        )
    else:
        if start_from is None:
            raise ValueError("cot-sft finetunes the instruct model: pass start_from")
        model.load_state_dict(start_from.state_dict())
        summary["final_batch_loss"] = _fit(
            model, documents(traces, ("cot",)), tok, cfg.finetune_epochs, cfg
        )
        summary["finetuned_from"] = "instruct"
    summary["train_seconds"] = round(time.perf_counter() - started, 2)
    summary["config"] = cfg.model_dump()
    return model, tok, summary


def load_token_lm(
    recipe: Recipe, traces: list[Trace], manifest: CorpusManifest, cfg: TokenLMConfig
) -> tuple[Path, dict[str, Any]]:
    """The model folder for a recipe, trained and cached on first use.

    `cot-sft` loads (or first trains) the cached instruct model and finetunes it, so the
    two baselines share their pre-finetune weights exactly.

    Returns:
        The folder (load it with `load_local_lm`, or hand it to `LocalLMProxyAdapter.from_folder`)
        and its card.
    """
    assert_trainable(traces, manifest)
    # Tiny models on a shared CPU: more threads only add contention (measured: a Track 1
    # pass took ~20x longer with torch's default thread count on two busy cores).
    torch.set_num_threads(cfg.threads)
    key = canonical_sha256(
        {
            "recipe": recipe,
            "config": cfg.model_dump(),
            "train": canonical_sha256([trace_sha256(t) for t in traces]),
            "vocab": hashlib.sha256(" ".join(vocabulary()).encode()).hexdigest(),
            "torch": torch.__version__.split("+")[0],
        }
    )[:16]
    folder = cache_dir().parent / "token-lm" / f"{recipe}-{key}"
    if (folder / "card.json").is_file():
        _, _, card = load_local_lm(folder)  # verifies the SHA-256
        return folder, {**card, "loaded_from_cache": True}
    start_from = None
    if recipe == "cot-sft":
        base_folder, _ = load_token_lm("instruct", traces, manifest, cfg)
        start_from, _, _ = load_local_lm(base_folder)
    _LOG.info("training token-world LM %s on %d train traces (first use; cached after)",
              recipe, len(traces))  # fmt: skip
    model, tok, summary = train_token_lm(traces, manifest, recipe, cfg, start_from)
    card = save_local_lm(folder, model, tok, {"name": recipe, "cache_key": key, **summary})
    return folder, {**card, "loaded_from_cache": False}
