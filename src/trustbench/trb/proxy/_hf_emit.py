"""The Hugging Face adapter's self-report: every slot continued from one cached prompt.

`LocalLMProxyAdapter.fill_slots` fills the block slot by slot, each slot a fresh pass of the
whole prompt so far and, on a subword tokenizer, one more pass per multi-token option: about
25 passes of the full prompt per self-report on SmolLM2. Here the prompt `history <r>` runs
once with its key/value cache kept; each slot then scores all its options in one pass over
that cache (`_hf_batch.score_options`, only the options' tokens are new), and the chosen
option's row becomes the next slot's prefix. The words, the probabilities and their order
are the ones `fill_slots` gives (the test keeps the per-slot path as the reference).

The self slot is scored over its first two words, as in `fill_slots`, but all three rows are
run: at step 0 the block says `na`, and that row's cache is the one continued.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from trustbench.trb.adapter._schema import StepContext
from trustbench.trb.proxy._hf_batch import Prefix, score_options

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


def _fill_chunk(
    adapter: HFCausalLMProxyAdapter, contexts: Sequence[StepContext]
) -> tuple[list[list[str]], dict[str, torch.Tensor]]:
    prompts = [adapter.prompt_for_report(c) for c in contexts]
    probs: dict[str, torch.Tensor] = {}
    prefix: Prefix | None = None
    last = list(adapter.encoding.options)[-1]
    for slot, options in adapter.encoding.options.items():
        scored = options[:2] if slot == "self" else options
        heads, tails, whole_word = adapter._option_tokens(prompts, scored)
        if len(scored) < len(options):  # the rows of words stated but never scored
            tails = [[*row, *adapter._option_tokens([p], options[len(scored) :])[1][0]]
                     for p, row in zip(prompts, tails, strict=True)]  # fmt: skip
        adapter._check_width(max(len(h) + len(t) for h, row in zip(heads, tails, strict=True)
                                 for t in row))  # fmt: skip
        if prefix is None:
            prefix = adapter._run_rows(heads, keep_cache=True)
        boundary = adapter._boundary if whole_word else None
        step = score_options(adapter.model, prefix, tails, adapter._pad, boundary)
        p = adapter._renormalised(step.logp[:, : len(scored)])
        probs[slot] = p
        chosen = [2 if slot == "self" and c.t == 0 else int(p[i].argmax())
                  for i, c in enumerate(contexts)]  # fmt: skip
        prompts = [[*prompt, options[k]] for prompt, k in zip(prompts, chosen, strict=True)]
        if slot != last:
            prefix = step.advance(chosen)
    return prompts, probs
