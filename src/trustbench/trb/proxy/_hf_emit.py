"""The Hugging Face adapter's self-report: every slot continued from one cached prompt.

`LocalLMProxyAdapter.fill_slots` fills the block slot by slot, each slot a fresh pass of the
whole prompt so far and, on a subword tokenizer, one more pass per multi-token option: about
25 passes of the full prompt per self-report on SmolLM2. Here the prompt `history <r>` runs
once with its key/value cache kept; each slot then scores all its options in one pass over
that cache (`_hf_batch.score_options`, only the options' tokens are new), and the chosen
option's row becomes the next slot's prefix. The tokens every option of a slot begins with
(` conf`, `=`) are run once, at the end of the previous slot's rows (or of the prompt), so
a row holds only an option's own tokens: their log-probability is added to every option's
chain (`Prefix.pending`), as the per-option chain counts it. The words, the probabilities
and their order are the ones `fill_slots` gives (the tests keep the slow path as reference).

The self slot is scored over its first two words, as in `fill_slots`, but all three rows are
run: at step 0 the block says `na`, and that row's cache is the one continued.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from trustbench.errors import InputError
from trustbench.trb.adapter._schema import StepContext
from trustbench.trb.proxy._hf_batch import score_options

if TYPE_CHECKING:
    from trustbench.trb.proxy._hf import HFCausalLMProxyAdapter

EMIT_ROWS = 64
"""Option rows per pass (contexts x a slot's options): bounds the copies of the prompt cache."""


def fill_reusing_prefix(
    adapter: HFCausalLMProxyAdapter, contexts: Sequence[StepContext]
) -> tuple[list[list[str]], dict[str, torch.Tensor]]:
    """`fill_slots(contexts)`'s prompts and per-slot probabilities, in chunks of contexts."""
    widest = max(len(options) for options in adapter.encoding.options.values())
    size = max(1, EMIT_ROWS // widest)
    prompts: list[list[str]] = []
    parts: dict[str, list[torch.Tensor]] = {}
    for begin in range(0, len(contexts), size):
        chunk_prompts, chunk_probs = _fill_chunk(adapter, contexts[begin : begin + size])
        prompts += chunk_prompts
        for slot, p in chunk_probs.items():
            parts.setdefault(slot, []).append(p)
    return prompts, {slot: torch.cat(p) for slot, p in parts.items()}


def _shared_start(tails: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """The tokens every option begins with (`conf`, `=`), leaving each at least one of its own."""
    width = min(len(t) for t in tails) - 1
    for i in range(width):
        if any(t[i] != tails[0][i] for t in tails):
            return tails[0][:i]
    return tails[0][:width]


def _slot_tails(
    adapter: HFCausalLMProxyAdapter, prompts: list[list[str]], options: Sequence[str], scored: int
) -> tuple[list[tuple[int, ...]], list[list[tuple[int, ...]]], bool]:
    """`_option_tokens` over the scored options, with the stated-but-unscored rows appended."""
    heads, tails, whole_word = adapter._option_tokens(prompts, options[:scored])
    if scored < len(options):  # the self slot's `na`: stated at step 0, never scored
        rest = [[adapter._split(p, o)[1] for o in options[scored:]] for p in prompts]
        tails = [[*row, *more] for row, more in zip(tails, rest, strict=True)]
    return heads, tails, whole_word


def _next_start(
    adapter: HFCausalLMProxyAdapter, prompt: list[str], word: str, options: Sequence[str]
) -> tuple[int, ...]:
    """The next slot's shared start after `prompt word`.

    None when a tokenisation is refused: the next slot's own call then says why, for the word
    actually chosen.
    """
    try:
        return _shared_start([adapter._split([*prompt, word], o)[1] for o in options])
    except InputError:
        return ()


def _fill_chunk(
    adapter: HFCausalLMProxyAdapter, contexts: Sequence[StepContext]
) -> tuple[list[list[str]], dict[str, torch.Tensor]]:
    """One chunk of contexts, filled slot by slot over one cached prompt.

    The prompt and the first slot's shared start run in one pass; then a pass per slot holds
    each option's own tokens followed by the next slot's shared start.
    """
    slots = list(adapter.encoding.options.items())
    prompts = [adapter.prompt_for_report(c) for c in contexts]
    probs: dict[str, torch.Tensor] = {}
    heads, tails, whole_word = _slot_tails(adapter, prompts, slots[0][1], _scored(slots[0]))
    shared = [_shared_start(row) for row in tails]
    rows = [h + c for h, c in zip(heads, shared, strict=True)]
    prefix = adapter._run_rows(rows, [len(h) - 1 for h in heads], keep_cache=True)
    for i, c in enumerate(shared):
        if c:
            prefix.pending[i] = prefix.reads[i][torch.arange(len(c)), torch.tensor(c)].sum()
    for s, (slot, options) in enumerate(slots):
        scored = _scored((slot, options))
        if s:
            heads, tails, whole_word = _slot_tails(adapter, prompts, options, scored)
        own = [[t[len(c) :] for t in row] for row, c in zip(tails, shared, strict=True)]
        then = None
        if s + 1 < len(slots):
            then = [[_next_start(adapter, p, o, slots[s + 1][1]) for o in options] for p in prompts]
        after = then or [[()] * len(options)] * len(prompts)
        adapter._check_width(max(len(h) + len(t) + len(a)
                                 for h, row, more in zip(heads, tails, after, strict=True)
                                 for t, a in zip(row, more, strict=True)))  # fmt: skip
        boundary = adapter._boundary if whole_word else None
        step = score_options(adapter.model, prefix, own, adapter._pad, boundary, then)
        p = adapter._renormalised(step.logp[:, :scored])
        probs[slot] = p
        chosen = [2 if slot == "self" and c.t == 0 else int(p[i].argmax())
                  for i, c in enumerate(contexts)]  # fmt: skip
        prompts = [[*prompt, options[k]] for prompt, k in zip(prompts, chosen, strict=True)]
        if then is not None:
            shared = [then[n][k] for n, k in enumerate(chosen)]
            prefix = step.advance(chosen)
    return prompts, probs


def _scored(slot: tuple[str, Sequence[str]]) -> int:
    """How many of a slot's words are scored: the self slot's `na` is stated, not asked."""
    return 2 if slot[0] == "self" else len(slot[1])
