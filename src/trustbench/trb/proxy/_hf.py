"""Proxy adapter over a local Hugging Face causal LM, given by folder path (never downloaded).

`HFCausalLMProxyAdapter` is `LocalLMProxyAdapter`'s recipe (slot-block prompting, exact
option probabilities, white-box hooks for Track 2) on a model and tokenizer that
`transformers` loads from a local folder written by `save_pretrained`.

No network, ever: the path must be an existing folder (a string such as `gpt2` is never
taken as a Hub repo id), both loaders get `local_files_only=True` (the guarantee), and
`HF_HUB_OFFLINE=1` is set for the process unless the user set it (effective when transformers
is imported here first). `trust_remote_code` stays off, so no code from the folder runs.

Device and dtype: `device` ("cpu", "cuda" or "cuda:N") and `dtype` ("float32", "bfloat16",
"float16") are checked before any weight is read (cuda asked for on a machine without it is
an `InputError`, never a silent fall back to the CPU). Inputs are built on the CPU and moved
to the model's device; log-probabilities come back as float64 on the CPU whatever the
weights' dtype, so reduced precision changes the model's numbers, never the harness's sums.

Exact option probabilities over words that a subword tokenizer splits into several tokens
are chained: an option o with tokens (o_1..o_m) after prompt x has

    log P(o | x) = sum_k log p(o_k | x, o_1..o_{k-1})

and the distribution over a slot's options is these probabilities renormalised over the
options (the mass left outside them is kept in `last_off_option_mass`). The chain is exact
when no option's tokens are a prefix of another's. When one is (a tokenizer that writes
digits one by one makes "conf=1" a prefix of "conf=10"), P(tokens of "conf=1") also counts
the start of "conf=10", so for that slot every option is scored as a whole word:

    log P(o | x) = sum_k log p(o_k | x, o_<k) + log sum_{b in B} p(b | x, o)

where B are the tokens that start a new word (a leading-space marker) or end the text. A
tokenizer that marks no word starts (word-level) cannot separate such options: refused,
never approximated. Options are scored in their canonical tokenisation (as in the usual
multiple-choice log-likelihood), not summed over every token sequence that spells them.

White-box: `hook_layers()` returns the decoder blocks (`model.transformer.h`,
`model.model.layers`, ...). Every forward pass has one row per context, in context order,
right-padded, so Track 2's `capture` / `inject` hooks index rows and positions as they do on
`TinyCausalLM`; positions are token indices.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from trustbench.errors import InputError
from trustbench.trb.adapter._protocol import AdapterTier, StepContext
from trustbench.trb.proxy._local import (
    HistoryRenderer,
    LocalLMProxyAdapter,
    Template,
    resolve_device_dtype,
)
from trustbench.trb.world import (
    CategoricalSlot,
    NumberSlot,
    SlotContext,
    SlotReport,
    SlotWorld,
    SlotWorldError,
    TextContext,
    text_world_for_task,
)
from trustbench.trb.world._slots import NULL_WORD, SLOT_BLOCK_CLOSE, SLOT_BLOCK_OPEN

# ------------------------------------------------------------------------------------------------
# Forward passes of the Hugging Face adapter that read only what is used, and reuse a prefix.
#
# Two costs dominated the adapter (issue 35): a float64 log-softmax over every position and the
# whole vocabulary of every row, when a read needs one position per row; and one forward pass
# of the full prompt per multi-token option per slot, about 25 per self-report, although every
# option of a slot shares the prompt before it. Here:
#
# - `run_rows` runs right-padded rows once, asks the model for logits only at each row's last
#   position (`logits_to_keep`, where the model's forward takes it), and keeps the model's
#   key/value cache when asked to;
# - `score_options` scores every option of a slot in one batched pass over that cache: each
#   context's options form one row, a tree of their tokens (shared leading tokens once), where
#   a 4D mask lets each token see only context n's cached prefix and its own option's earlier
#   tokens, at its true positions (`position_ids`), pads in the cache masked out;
# - `Scored.advance` keeps the chosen option's tokens visible per context (the others stay in
#   the cache, masked), so the next slot continues from the cache instead of running the
#   prompt again;
# - a `Lead` (`lead_prefix`) puts the prompt rows at the head of the first slot's pass, the
#   option tree after them, so the prompt costs no pass of its own (a pass has a fixed cost of
#   about a quarter of a forward on SmolLM2). A self-report is one pass per slot or slot pair.
#
# Only the read positions are cast to float64 before the log-softmax (the model's logits stay in
# its dtype); the sums are the same as on the full tensor. A padded key is masked to weight zero,
# so a row's result equals the unpadded row's up to float rounding of differently shaped matrix
# products (about 1e-7 in float32).


@functools.cache
def _forward_parameters(model_class: type) -> frozenset[str]:
    """Names the model class's forward accepts (to pick the cache and logits arguments)."""
    return frozenset(inspect.signature(model_class.forward).parameters)


def forward(
    model: nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    *,
    keep: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    cache: Any = None,
    use_cache: bool = False,
) -> tuple[torch.Tensor, Any]:
    """One forward pass: logits (B, T', V) in the model's dtype, and the cache when kept.

    Args:
        model: A `transformers` causal LM.
        ids: Token ids (B, T) on the model's device.
        mask: Attention mask over cache and new tokens (B, C + T).
        keep: Sequence positions whose logits are computed (all when None or unsupported;
            the caller reads positions by their index in `keep` only when it was applied).
        positions: Position ids (B, T); the model's default when None.
        cache: The model's key/value cache from an earlier pass, continued here.
        use_cache: Whether to return the cache.
    """
    names = _forward_parameters(type(model))
    kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "use_cache": use_cache}
    if keep is not None and "logits_to_keep" in names:
        kwargs["logits_to_keep"] = keep
    if positions is not None:
        kwargs["position_ids"] = positions
    if cache is not None:
        kwargs["cache" if "cache" in names else "past_key_values"] = cache
    with torch.no_grad():
        out = model(**kwargs)
    if not use_cache:
        return out.logits, None
    return out.logits, out.cache if "cache" in names else out.past_key_values


def keeps_logits_subset(model: nn.Module) -> bool:
    """Whether the model's forward computes logits at chosen positions only."""
    return "logits_to_keep" in _forward_parameters(type(model))


def padded(rows: Sequence[Sequence[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids (N, T) and their attention mask (N, T), on the CPU."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids, mask


@dataclass
class Prefix:
    """Rows run so far: the cache over them and what the next token is read from."""

    cache: Any
    """The model's key/value cache (None when not kept)."""
    mask: torch.Tensor
    """(N, C) 1 where a cache position holds a real token, 0 for a pad (CPU, long)."""
    length: torch.Tensor
    """(N,) real tokens so far per row: the position of the next token (CPU, long)."""
    next_logp: torch.Tensor
    """(N, V) float64 log-probabilities of the next token per row (CPU)."""
    reads: list[torch.Tensor]
    """Per row, float64 log-probabilities after each position from the read start (CPU)."""
    pending: torch.Tensor
    """(N,) float64 log-probability of tokens run after the last scored option: the start
    every next option shares (zero when none)."""
    lead: Lead | None = None
    """Prompt rows not run yet: the next `score_options` runs them first in its pass."""


@dataclass
class Lead:
    """Prompt rows left-padded to one width P, run ahead of a slot's option tree in one pass.

    Each prompt token sees its own row's earlier tokens (causal), at positions 0.. from its
    first real token; a pad sees only itself. Read from `starts` on, as `run_rows` reads.
    """

    ids: torch.Tensor
    """(N, P) token ids, left-padded (CPU, long)."""
    starts: torch.Tensor
    """(N,) index in `ids` of each row's first read position (CPU, long)."""

    def joined(
        self, prefix: Prefix, ids: torch.Tensor, positions: torch.Tensor, visible: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The prompt block before the tree's: ids, positions, visibility, logits kept."""
        n_rows, width = self.ids.shape
        valid = prefix.mask.bool()
        causal = torch.ones((width, width), dtype=torch.bool).tril() & valid.unsqueeze(1)
        causal |= torch.eye(width, dtype=torch.bool)
        tree = torch.zeros((n_rows, width, ids.shape[1]), dtype=torch.bool)
        top = torch.cat([causal, tree], 2)
        own = (valid.long().cumsum(1) - 1).clamp(min=0)
        keep = torch.arange(int(self.starts.min()), width + ids.shape[1])
        return (torch.cat([self.ids, ids], 1), torch.cat([own, positions], 1),
                torch.cat([top, visible], 1), keep)  # fmt: skip

    def read(self, prefix: Prefix, logits: torch.Tensor, offset: int) -> torch.Tensor:
        """Fill `prefix`'s next-token and pending log-probabilities; the tree's logits.

        `offset` is the sequence index of `logits[:, 0]` (the first kept position).
        """
        width = self.ids.shape[1]
        nexts = []
        for n in range(len(self.ids)):
            at = torch.arange(int(self.starts[n]), width)
            reads = torch.log_softmax(logits[n, (at - offset).to(logits.device)].double(), -1)
            reads = reads.cpu()
            tokens = self.ids[n, at[1:]]  # the shared start run after the prompt
            prefix.pending[n] = reads[torch.arange(len(tokens)), tokens].sum()
            nexts.append(reads[-1])
        prefix.next_logp = torch.stack(nexts)
        return logits[:, width - offset :]


def lead_prefix(rows: Sequence[Sequence[int]], starts: Sequence[int], pad: int) -> Prefix:
    """Rows to run at the head of the next `score_options` pass, read from `starts[i]` on.

    The first slot's options then go in the prompt's own pass, saving a pass's fixed cost.
    """
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
        mask[i, width - len(r) :] = 1
    shift = torch.tensor([width - len(r) for r in rows])
    lead = Lead(ids, torch.tensor(list(starts)) + shift)
    zeros = torch.zeros(len(rows), dtype=torch.float64)
    length = torch.tensor([len(r) for r in rows])
    return Prefix(None, mask, length, torch.empty((len(rows), 0)), [], zeros, lead)


def run_rows(
    model: nn.Module,
    rows: Sequence[Sequence[int]],
    pad: int,
    device: torch.device,
    starts: Sequence[int] | None = None,
    keep_cache: bool = False,
) -> Prefix:
    """Run right-padded rows once; read log-probabilities from `starts[i]` to each row's end.

    `starts` defaults to each row's last token. Logits are computed only at read positions
    where the model allows it (`logits_to_keep`), and only those are cast to float64.
    """
    ids, mask = padded(rows, pad)
    ends = [len(r) for r in rows]
    first = [e - 1 for e in ends] if starts is None else list(starts)
    keep = torch.unique(torch.cat([torch.arange(a, e) for a, e in zip(first, ends, strict=True)]))
    logits, cache = forward(
        model, ids.to(device), mask.to(device), keep=keep.to(device), use_cache=keep_cache
    )
    subset = keeps_logits_subset(model)
    reads = []
    for i, (a, e) in enumerate(zip(first, ends, strict=True)):
        wanted = torch.arange(a, e)
        column = torch.searchsorted(keep, wanted) if subset else wanted
        reads.append(torch.log_softmax(logits[i, column.to(logits.device)].double(), -1).cpu())
    next_logp = torch.stack([r[-1] for r in reads])
    pending = torch.zeros(len(rows), dtype=torch.float64)
    return Prefix(cache, mask, torch.tensor(ends), next_logp, reads, pending)


def chain_per_option(
    run: Callable[..., Prefix],
    heads: Sequence[tuple[int, ...]],
    tails: Sequence[Sequence[tuple[int, ...]]],
    boundary: torch.Tensor | None,
) -> torch.Tensor:
    """Chained option log-probabilities (N, K), each pass a whole row per prompt (hooks apply).

    The prompts alone first (the pass Track 2 captures); then one pass of prompt + option
    tokens per option longer than one token (every option, when a word boundary is scored),
    reading position len(head) - 1 + j for token j and, with `boundary`, the word's end.
    """
    first = run(heads).next_logp
    logp = torch.empty((len(heads), len(tails[0])), dtype=torch.float64)
    for k in range(len(tails[0])):
        column = [row[k] for row in tails]
        if boundary is None and all(len(t) == 1 for t in column):
            logp[:, k] = first[torch.arange(len(heads)), torch.tensor([t[0] for t in column])]
            continue
        keep = 0 if boundary is not None else 1  # the boundary is read after the last token
        rows = [h + t[: len(t) - keep] for h, t in zip(heads, column, strict=True)]
        reads = run(rows, [len(h) - 1 for h in heads]).reads
        for i, t in enumerate(column):
            # reads[i][j] is the distribution of token j of the option (0-based).
            logp[i, k] = reads[i][torch.arange(len(t)), torch.tensor(t)].sum()
            if boundary is not None:
                logp[i, k] += torch.logsumexp(reads[i][len(t), boundary], -1)
    return logp


@dataclass
class Scored:
    """Every option of a slot scored over a prefix; `advance` continues with one per row."""

    logp: torch.Tensor
    """(N, K) float64 log P(option tokens | prefix) per row and option."""
    prefix: Prefix
    rows: list[tuple[int, ...]]
    """The pass's rows, n * K + k: option k's scored tokens, then its `then` tokens."""
    scored: list[int]
    """Per row, how many of its tokens are the option's own (the rest are `then`)."""
    cache: Any
    mask: torch.Tensor
    """(N * K, C + W) per option row, the cache entries it sees: its context's prefix and its
    own tokens in the packed row of width W."""
    token_logp: torch.Tensor
    """(N * K, M, V) float64 log-probabilities after each option token (padded rows repeat
    their last)."""
    device: torch.device
    """The model's device (where the cache lives)."""

    def advance(self, chosen: Sequence[int]) -> Prefix:
        """The prefix extended by option `chosen[n]` (and its `then` tokens) on row n.

        The `then` tokens' log-probability is kept in `Prefix.pending`: the next slot's
        options all begin with them, so it is part of every one of their chains.
        """
        k = len(self.logp[0])
        rows = [n * k + c for n, c in enumerate(chosen)]
        ends = torch.tensor([len(self.rows[r]) for r in rows])
        pending = torch.zeros(len(rows), dtype=torch.float64)
        for i, r in enumerate(rows):
            own, row = self.scored[r], self.rows[r]
            if len(row) > own:
                steps = torch.arange(own - 1, len(row) - 1)
                pending[i] = self.token_logp[r, steps, torch.tensor(row[own:])].sum()
        index = torch.tensor(rows)
        # The pass packed each context's options into its one row: the cache rows are the
        # contexts already, and the mask keeps only the chosen option's entries visible.
        cache = self.cache
        next_logp = self.token_logp[index, ends - 1]
        length = self.prefix.length + ends
        return Prefix(cache, self.mask[index], length, next_logp, [], pending)


def _packed(
    rows: Sequence[tuple[int, ...]], k: int, prefix: Prefix, pad: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[list[int]]]:
    """Each context's K rows as one row of a token tree: ids, positions, 4D visibility, places.

    Rows of a context that begin alike (` plan`, `=` before every plan word) share those
    tokens' places: `places[r][i]` is where token i of row r sits, at true position
    `length[n] + i`. A token sees context n's valid cache and its own ancestors in the tree,
    so each row's tokens are computed as if alone. A pad sees the cache and itself.
    """
    n_rows = len(prefix.length)
    nodes: list[dict[tuple[int, int], int]] = [{} for _ in range(n_rows)]
    parents: list[list[int]] = [[] for _ in range(n_rows)]
    tokens: list[list[int]] = [[] for _ in range(n_rows)]
    places = []
    for r, row in enumerate(rows):
        n, at, place = r // k, -1, []
        for token in row:
            if (at, token) not in nodes[n]:
                nodes[n][(at, token)] = len(tokens[n])
                parents[n].append(at)
                tokens[n].append(token)
            at = nodes[n][(at, token)]
            place.append(at)
        places.append(place)
    width = max(1, *(len(t) for t in tokens))
    ids = torch.full((n_rows, width), pad, dtype=torch.long)
    positions = prefix.length.unsqueeze(1).repeat(1, width)
    local = torch.eye(width, dtype=torch.bool).repeat(n_rows, 1, 1)
    for n in range(n_rows):
        for i, (token, parent) in enumerate(zip(tokens[n], parents[n], strict=True)):
            ids[n, i] = token
            if parent >= 0:  # a child sees what its parent sees, one position later
                local[n, i] |= local[n, parent]
                positions[n, i] = positions[n, parent] + 1
    cached = prefix.mask.bool().unsqueeze(1).expand(n_rows, width, prefix.mask.shape[1])
    return ids, positions, torch.cat([cached, local], dim=2), places


def score_options(
    model: nn.Module,
    prefix: Prefix,
    tails: list[list[tuple[int, ...]]],
    pad: int,
    boundary: torch.Tensor | None,
    then: list[list[tuple[int, ...]]] | None = None,
) -> Scored:
    """Chain log P(o_1..o_m | prefix) for every (row, option) in one pass over the cache.

    `tails[n][k]` are option k's tokens after row n's prefix. Option row n*K + k holds them
    at positions length[n].., attending to row n's cache; the first token is read from
    `prefix.next_logp`, token j from the pass's logits after token j - 1, and
    `prefix.pending` (tokens fed before, shared by every option) is added. With `boundary`,
    the log-probability that a new word (or the text's end) follows is added, read after the
    last token (options whose tokens begin another's are scored as whole words). `then[n][k]`
    are tokens run after option k but not scored with it (the next slot's shared start).

    The K option rows of a context are packed into one row of a token tree with a 4D mask
    (`_packed`): rows of one or two tokens padded to the widest, each with the tokens every
    option begins with, would spend much of the pass on pads, repeats and K cache copies.
    Without `then` or `boundary`, an option's last token is not fed (nothing reads after it).
    """
    n_rows, k = len(tails), len(tails[0])
    flat = [t for row in tails for t in row]
    rows = [t + (then[i // k][i % k] if then else ()) for i, t in enumerate(flat)]
    if then is None and boundary is None and any(len(t) > 1 for t in flat):
        rows = [t[:-1] for t in flat]  # nothing reads the logits after an option's last token
    ids, positions, visible, places = _packed(rows, k, prefix, pad)
    keep = None
    if prefix.lead is not None:
        ids, positions, visible, keep = prefix.lead.joined(prefix, ids, positions, visible)
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    additive = torch.zeros(visible.shape, dtype=dtype).masked_fill(~visible, torch.finfo(dtype).min)
    logits, cache = forward(
        model,
        ids.to(device),
        additive.unsqueeze(1).to(device),
        keep=None if keep is None else keep.to(device),
        positions=positions.to(device),
        cache=prefix.cache,
        use_cache=True,
    )
    if prefix.lead is not None and keep is not None:
        offset = int(keep[0]) if keeps_logits_subset(model) else 0
        logits = prefix.lead.read(prefix, logits, offset)
        ids = ids[:, prefix.lead.ids.shape[1] :]
    packed_logp = torch.log_softmax(logits.double(), -1).cpu()
    longest = max(len(r) for r in rows)
    column = torch.tensor([[p[min(j, len(p) - 1)] if p else 0 for j in range(max(longest, 1))]
                           for p in places])  # fmt: skip
    context = torch.arange(n_rows).repeat_interleave(k)
    token_logp = packed_logp[context.unsqueeze(1), column]
    cached = prefix.mask.shape[1]
    mask = torch.cat(
        [prefix.mask[context], torch.zeros((len(rows), ids.shape[1]), dtype=torch.long)], 1
    )
    for r, place in enumerate(places):
        mask[r, [cached + i for i in place]] = 1
    logp = torch.empty((n_rows, k), dtype=torch.float64)
    for row, tail in enumerate(flat):
        n = row // k
        total = prefix.pending[n] + prefix.next_logp[n, tail[0]]
        if len(tail) > 1:
            steps = torch.arange(len(tail) - 1)
            total = total + token_logp[row, steps, torch.tensor(tail[1:])].sum()
        if boundary is not None:
            total = total + torch.logsumexp(token_logp[row, len(tail) - 1, boundary], -1)
        logp[n, row % k] = total
    own = [len(t) for t in flat]
    return Scored(logp, prefix, rows, own, cache, mask, token_logp, device)


# ------------------------------------------------------------------------------------------------
# The Hugging Face adapter's self-report: every slot continued from one cached prompt.
#
# `LocalLMProxyAdapter.fill_slots` fills the block slot by slot, each slot a fresh pass of the
# whole prompt so far and, on a subword tokenizer, one more pass per multi-token option: about
# 25 passes of the full prompt per self-report on SmolLM2. Here the prompt `history <r>` runs
# once, in the first slot's pass ahead of its options (`_hf_batch.Lead`), with its key/value
# cache kept; each later slot scores all its options in one pass over that cache
# (`_hf_batch.score_options`, only the options' tokens are new; two adjacent slots with few
# options, goal and belief, share one), and the chosen option's row becomes the next
# slot's prefix. The tokens every option of a slot begins with (` conf`, `=`) are run once, at
# the end of the previous slot's rows (or of the prompt) when those are no more than this
# slot's, so a row holds only an option's own tokens: their log-probability is added to every
# option's chain (`Prefix.pending`), as the per-option chain counts it. The words, the probabilities
# and their order are the ones `fill_slots` gives (the tests keep the slow path as reference).
#
# The self slot is scored over its first two words, as in `fill_slots`, but all three rows are
# run: at step 0 the block says `na`, and that row's cache is the one continued.

PAIR_ROWS = 6
"""Two adjacent slots share one pass when their options make at most this many rows."""

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
    heads, tails, whole_word = adapter._option_tokens(prompts, [options[:scored]] * len(prompts))
    if scored < len(options):  # the self slot's `na`: stated at step 0, never scored
        rest = [[adapter._split(p, o)[1] for o in options[scored:]] for p in prompts]
        tails = [[*row, *more] for row, more in zip(tails, rest, strict=True)]
    return heads, tails, whole_word


def _next_start(
    adapter: HFCausalLMProxyAdapter, prompt: list[str], word: str, options: Sequence[str]
) -> tuple[int, ...]:
    """The next slot's shared start after `prompt word`.

    Empty when a tokenisation is refused: the next slot's own call then says why, for the word
    actually chosen.
    """
    try:
        return _shared_start([adapter._split([*prompt, word], o)[1] for o in options])
    except InputError:
        return ()


@dataclass
class _Fill:
    """A chunk's state between slots: words so far, the cache, the next slot's shared start."""

    contexts: Sequence[StepContext]
    prompts: list[list[str]]
    prefix: Prefix
    shared: list[tuple[int, ...]]
    probs: dict[str, torch.Tensor]


def _fill_chunk(
    adapter: HFCausalLMProxyAdapter, contexts: Sequence[StepContext]
) -> tuple[list[list[str]], dict[str, torch.Tensor]]:
    """One chunk of contexts, filled slot by slot over one cached prompt.

    The prompt and the first slot's shared start run in the first slot's pass, ahead of its
    option tree (`_hf_batch.Lead`); a pass per slot holds
    each option's own tokens followed by the next slot's shared start (when the next slot has
    at least as many options; else its own rows begin with it). Two adjacent slots
    with few options (goal and belief: 2 x 2 rows) share one pass, every pair of their
    options in a row (`_pair`), since a pass costs about the same however few tokens it has.
    """
    slots = list(adapter.encoding.options.items())
    prompts = [adapter.prompt_for_report(c) for c in contexts]
    heads, tails, _ = _slot_tails(adapter, prompts, slots[0][1], _scored(slots[0]))
    shared = [_shared_start(row) for row in tails]
    rows = [h + c for h, c in zip(heads, shared, strict=True)]
    adapter._check_width(max(len(r) for r in rows))
    prefix = lead_prefix(rows, [len(h) - 1 for h in heads], adapter._pad)  # run with slot 1
    state = _Fill(contexts, prompts, prefix, shared, {})
    s = 0
    while s < len(slots):
        ahead = slots[s + 2][1] if s + 2 < len(slots) else None
        few = s + 1 < len(slots) and len(slots[s][1]) * len(slots[s + 1][1]) <= PAIR_ROWS
        if few and _pair(adapter, state, slots[s], slots[s + 1], ahead):
            s += 2
            continue
        _single(adapter, state, slots[s], slots[s + 1][1] if s + 1 < len(slots) else None)
        s += 1
    return state.prompts, state.probs


def _choose(slot: str, p: torch.Tensor, contexts: Sequence[StepContext]) -> list[int]:
    """The stated word per context: the most likely, or `na` for self at step 0."""
    return [2 if slot == "self" and c.t == 0 else int(p[i].argmax())
            for i, c in enumerate(contexts)]  # fmt: skip


def _single(
    adapter: HFCausalLMProxyAdapter,
    state: _Fill,
    slot: tuple[str, Sequence[str]],
    following: Sequence[str] | None,
) -> None:
    """One slot in one pass: each option's own tokens, then the next slot's shared start."""
    name, options = slot
    scored = _scored(slot)
    heads, tails, whole_word = _slot_tails(adapter, state.prompts, options, scored)
    own = [[t[len(c) :] for t in row] for row, c in zip(tails, state.shared, strict=True)]
    then = None
    if following is not None:
        # Run the next slot's shared start once per option row here only when there are no
        # more rows here than there (else the next slot's rows carry it themselves).
        few = len(options) <= len(following)
        then = [[_next_start(adapter, p, o, following) if few else () for o in options]
                for p in state.prompts]  # fmt: skip
    after = then or [[()] * len(options)] * len(state.prompts)
    adapter._check_width(max(len(h) + len(t) + len(a)
                             for h, row, more in zip(heads, tails, after, strict=True)
                             for t, a in zip(row, more, strict=True)))  # fmt: skip
    boundary = adapter._boundary if whole_word else None
    step = score_options(adapter.model, state.prefix, own, adapter._pad, boundary, then)
    p = adapter._renormalised(step.logp[:, :scored])
    state.probs[name] = p
    chosen = _choose(name, p, state.contexts)
    state.prompts = [[*prompt, options[k]] for prompt, k in zip(state.prompts, chosen, strict=True)]
    if then is not None:
        state.shared = [then[n][k] for n, k in enumerate(chosen)]
        state.prefix = step.advance(chosen)


def _pair(
    adapter: HFCausalLMProxyAdapter,
    state: _Fill,
    first: tuple[str, Sequence[str]],
    second: tuple[str, Sequence[str]],
    following: Sequence[str] | None,
) -> bool:
    """Two slots in one pass, one row per pair of their options.

    Row (j, k) holds option j of the first slot's own tokens, option k of the second (its
    shared start included) and the shared start of the slot after.
    Returns False (nothing done) when some pair of words tokenises in a way the per-slot path
    would refuse; then the slots go one by one and the refusal, if any, names the word chosen.
    """
    (name1, options1), (name2, options2) = first, second
    scored1, scored2 = _scored(first), _scored(second)
    heads, tails1, whole1 = _slot_tails(adapter, state.prompts, options1, scored1)
    own1 = [[t[len(c) :] for t in row] for row, c in zip(tails1, state.shared, strict=True)]
    try:
        # tails2[n][j][k]: option k of the second slot after prompt n and word j of the first.
        tails2 = [[[adapter._split([*p, w], o)[1] for o in options2] for w in options1]
                  for p in state.prompts]  # fmt: skip
    except InputError:
        return False
    after3 = following or ()
    few = len(options1) * len(options2) <= len(after3)
    then2 = [[[_next_start(adapter, [*p, w], o, after3) if few else ()
               for o in options2] for w in options1] for p in state.prompts]  # fmt: skip
    k1, k2 = len(options1), len(options2)
    joint = [[own1[n][j] for j in range(k1) for _ in range(k2)] for n in range(len(heads))]
    after = [[tails2[n][j][k] + then2[n][j][k] for j in range(k1) for k in range(k2)]
             for n in range(len(heads))]  # fmt: skip
    adapter._check_width(max(len(h) + len(t1) + len(a)
                             for h, row, more in zip(heads, joint, after, strict=True)
                             for t1, a in zip(row, more, strict=True)))  # fmt: skip
    boundary1 = adapter._boundary if whole1 else None
    step = score_options(adapter.model, state.prefix, joint, adapter._pad, boundary1, after)
    p1 = adapter._renormalised(step.logp[:, ::k2][:, :scored1])
    state.probs[name1] = p1
    chosen1 = _choose(name1, p1, state.contexts)
    prompts = [[*prompt, options1[j]] for prompt, j in zip(state.prompts, chosen1, strict=True)]
    _, tails_chosen, whole2 = _slot_tails(adapter, prompts, options2, scored2)  # as per slot
    boundary2 = adapter._boundary if whole2 else None
    logp2 = torch.empty((len(heads), k2), dtype=torch.float64)
    for n, j in enumerate(chosen1):
        start = len(own1[n][j])
        for k in range(k2):
            r = n * k1 * k2 + j * k2 + k
            tokens = tails_chosen[n][k]  # tails2[n][j][k]: the same tokenisation
            # Token i sits at row position start + i, predicted by the logits one before it.
            steps = torch.arange(start - 1, start - 1 + len(tokens))
            total = step.token_logp[r, steps, torch.tensor(tokens)].sum()
            if boundary2 is not None:
                end = start - 1 + len(tokens)
                total = total + torch.logsumexp(step.token_logp[r, end, boundary2], -1)
            logp2[n, k] = total
            step.scored[r] = start + len(tokens)
    p2 = adapter._renormalised(logp2[:, :scored2])
    state.probs[name2] = p2
    chosen2 = _choose(name2, p2, state.contexts)
    state.prompts = [[*prompt, options2[k]] for prompt, k in zip(prompts, chosen2, strict=True)]
    rows = [j * k2 + k for j, k in zip(chosen1, chosen2, strict=True)]
    if following is not None:
        pairs = enumerate(zip(chosen1, chosen2, strict=True))
        state.shared = [then2[n][j][k] for n, (j, k) in pairs]
        state.prefix = step.advance(rows)
    return True


def _scored(slot: tuple[str, Sequence[str]]) -> int:
    """How many of a slot's words are scored: the self slot's `na` is stated, not asked."""
    return 2 if slot[0] == "self" else len(slot[1])


# ------------------------------------------------------------------------------------------------
# Where the decoder blocks of a Hugging Face causal LM live (Track 2 hooks them).

LAYER_PATHS: tuple[str, ...] = (
    "transformer.h",  # GPT-2, GPT-J, GPT-Neo, Bloom, Falcon
    "model.layers",  # Llama, Mistral, Qwen, Gemma, Phi-3
    "gpt_neox.layers",  # GPT-NeoX, Pythia
    "model.decoder.layers",  # OPT
    "transformer.blocks",  # MPT
)
"""Attribute paths of the decoder block list in common causal-LM families, tried in order."""


def decoder_layers(model: nn.Module, path: str | None = None) -> list[nn.Module]:
    """The decoder blocks of a causal LM, in depth order.

    Args:
        model: The loaded model.
        path: Dotted attribute path of the block list; tried from `LAYER_PATHS` when None.

    Raises:
        InputError: when no block list is found (pass `layers_path`).
    """
    for candidate in (path,) if path else LAYER_PATHS:
        found: Any = model
        for part in candidate.split("."):
            found = getattr(found, part, None)
        if isinstance(found, nn.ModuleList) and len(found) > 0:
            return list(found)
    tried = path or ", ".join(LAYER_PATHS)
    raise InputError(
        f"no decoder block list at {tried} in {type(model).__name__}; "
        "pass layers_path='dotted.path.to.blocks'",
        location="hook_layers",
    )


# ------------------------------------------------------------------------------------------------
# Which tokens start a new word: the whole-word scoring of options that begin one another.

WORD_START_MARKERS: tuple[str, ...] = (
    "Ġ",
    "Ċ",
    "ĉ",
    "▁",
    " ",
    "\n",
    "\t",
    "<0x20>",
    "<0x0A>",
    "<0x09>",
)
"""Prefixes of token strings that begin a new word: byte-level BPE, SentencePiece, byte fallback."""

_FOUND: weakref.WeakKeyDictionary[Any, torch.Tensor | None] = weakref.WeakKeyDictionary()
"""Word-start ids per tokenizer object: reading a 49k vocabulary takes about 0.2 s, and a
fresh adapter over the same tokenizer (the benches', Track 6's) should not pay it again."""


def word_start_ids(tokenizer: Any) -> torch.Tensor | None:
    """Ids of tokens that start a new word (or end the text); None when none are marked."""
    with contextlib.suppress(KeyError, TypeError):
        return _FOUND[tokenizer]
    vocab: dict[str, int] = tokenizer.get_vocab()
    ids = {i for token, i in vocab.items() if token.startswith(WORD_START_MARKERS)}
    eos = getattr(tokenizer, "eos_token_id", None)
    if ids and eos is not None:
        ids.add(int(eos))
    found = torch.tensor(sorted(ids)) if ids else None
    with contextlib.suppress(TypeError):  # a tokenizer that takes no weak reference
        _FOUND[tokenizer] = found
    return found


_GLOBAL_HOOKS = nn.modules.module._global_forward_hooks
"""Hooks `register_module_forward_hook` attached to every module (the same dict object)."""

INSTALL_HINT = (
    "install the optional extra: pip install -e '.[hf]' in a clone (README: Installing without "
    "make)"
)
"""What to do when `transformers` is missing."""


def _transformers(location: str) -> Any:
    """Import `transformers` offline, or say how to install it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import transformers
    except ImportError as error:
        raise InputError(
            f"the Hugging Face adapter needs transformers ({error}); {INSTALL_HINT}",
            location=location,
        ) from None
    return transformers


def load_hf_causal_lm(
    path: Path | str, *, device: str = "cpu", dtype: str = "float32"
) -> tuple[nn.Module, Any]:
    """Load a causal LM and its tokenizer from a local `save_pretrained` folder.

    Args:
        path: The folder.
        device: "cpu", "cuda" or "cuda:N" (see `resolve_device_dtype`).
        dtype: Weight dtype name, one of `DTYPES`.

    Raises:
        InputError: the folder is missing or lacks config.json, transformers is not
            installed, the config is not a causal LM, weights or tokenizer fail to load, or
            the device or dtype is unknown or unavailable.
    """
    folder = Path(path).expanduser()
    where = str(folder)
    torch_device, torch_dtype = resolve_device_dtype(device, dtype, where)
    if not folder.is_dir():
        raise InputError(
            "no such model folder (a local save_pretrained folder is required; "
            "nothing is downloaded)",
            location=where,
        )
    if not (folder / "config.json").is_file():
        raise InputError("model folder lacks config.json", location=where)
    transformers = _transformers(where)
    folder = folder.resolve()
    try:
        config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, KeyError) as error:
        raise InputError(
            f"config.json is not a transformers config: {error}", location=where
        ) from None
    causal = transformers.models.auto.modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    if config.model_type not in causal:
        raise InputError(
            f"model_type {config.model_type!r} is not a causal LM "
            "(AutoModelForCausalLM has no class for it)",
            location=str(folder / "config.json"),
        )
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, local_files_only=True, trust_remote_code=False, torch_dtype=torch_dtype
        ).to(torch_device)
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        raise InputError(f"cannot load the causal LM weights: {error}", location=where) from None
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            folder, local_files_only=True, trust_remote_code=False
        )
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise InputError(f"cannot load the tokenizer: {error}", location=where) from None
    if tokenizer is None or isinstance(tokenizer, bool):
        raise InputError("the folder holds no tokenizer", location=where)
    return model.eval(), tokenizer


class HFCausalLMProxyAdapter(LocalLMProxyAdapter):
    """`LocalLMProxyAdapter` on a Hugging Face causal LM (see module docstring).

    Args:
        model: A `transformers` causal LM (its forward returns `.logits`).
        tokenizer: Its tokenizer (`tokenizer(text)["input_ids"]`).
        name: Name in result rows.
        render_history: Renders a context's observations as words; the token world's
            (`trb._token_world.render_history`) when None.
        template: `direct` (instruct) or `reasoning-first` (CoT-prompted / CoT-finetuned).
        layers_path: Dotted path of the decoder block list when not a known family's.
        memo: Results cache shared between adapters over the same weights.
        location: Where the model came from, for error messages.
    """

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Any,
        name: str,
        render_history: HistoryRenderer | None = None,
        template: Template = "reasoning-first",
        *,
        layers_path: str | None = None,
        memo: dict[Any, Any] | None = None,
        location: str = "hf model",
    ) -> None:
        if render_history is None:
            # Imported here: the token world imports this package (a cycle at module level).
            from trustbench.trb.reference._token_world import render_history
        super().__init__(model, tokenizer, name, render_history, template, memo)
        self.location = location
        self._layers = decoder_layers(model, layers_path)
        self._token_cache: dict[tuple[str, ...], tuple[int, ...]] = {}
        pad = getattr(tokenizer, "pad_token_id", None)
        if pad is None:
            pad = getattr(tokenizer, "eos_token_id", None)
        # Rows are right-padded and read at real positions only, and the causal mask keeps
        # a real position from seeing later pads, so the pad id never changes a result.
        self._pad = int(pad) if pad is not None else 0
        self._white_box = False
        """True inside `slot_probability`: Track 2's passes keep one whole row per context."""

    @classmethod
    def from_path(
        cls,
        path: Path | str,
        name: str | None = None,
        render_history: HistoryRenderer | None = None,
        template: Template = "reasoning-first",
        *,
        layers_path: str | None = None,
        device: str = "cpu",
        dtype: str = "float32",
    ) -> HFCausalLMProxyAdapter:
        """Load a local `save_pretrained` folder (see `load_hf_causal_lm`); no download.

        `device` and `dtype` are validated before loading (`resolve_device_dtype`).
        """
        model, tokenizer = load_hf_causal_lm(path, device=device, dtype=dtype)
        return cls(
            model,
            tokenizer,
            name or Path(path).name,
            render_history,
            template,
            layers_path=layers_path,
            location=str(path),
        )

    def hook_layers(self) -> list[nn.Module]:
        """The decoder blocks Track 2 hooks, in depth order."""
        return list(self._layers)

    # --- tokens ---------------------------------------------------------------------------
    def tokens(self, words: Sequence[str]) -> tuple[int, ...]:
        """Token ids of words joined by single spaces (the tokenizer's own special tokens)."""
        key = tuple(words)
        if key not in self._token_cache:
            if len(self._token_cache) > 100_000:
                self._token_cache.clear()
            ids = self.tokenizer(" ".join(key))["input_ids"]  # type: ignore[operator]
            self._token_cache[key] = tuple(int(i) for i in ids)
        return self._token_cache[key]

    def _word_ids(self, word: str) -> list[int]:
        """Token ids of one word as the tokenizer spells it (subwords)."""
        return list(self.tokens([word]))

    def _split(self, prompt: Sequence[str], option: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(prompt tokens, option tokens): the option's tokens as they follow this prompt.

        Tokenising the joined text and cutting at the prompt's own tokens keeps merges and
        leading-space markers exactly as the model would see them; a tokenizer that merges
        across the boundary cannot score the option separately and is refused.
        """
        head, full = self.tokens(prompt), self.tokens([*prompt, option])
        if full[: len(head)] != head or len(full) == len(head):
            raise InputError(
                f"tokenizer merges option {option!r} into the prompt before it, so its "
                "probability cannot be read token by token",
                location=self.location,
            )
        tail = full[len(head) :]
        unk = getattr(self.tokenizer, "unk_token_id", None)
        if unk is not None and unk in tail:
            raise InputError(
                f"option word {option!r} is outside the tokenizer's vocabulary (<unk>)",
                location=self.location,
            )
        return head, tail

    def text_logprob(self, prompt: list[str], text: str) -> float:
        """Sum of log p(token | prompt, earlier tokens) over the subword tokens of `text`.

        The text's tokens are cut from the tokenised whole (`_split`), as an option's are, and
        read from one pass of prompt + text at positions len(prompt) - 1 onwards.
        """
        head, tail = self._split(prompt, text)
        reads = self._run_rows([head + tail[:-1]], [len(head) - 1]).reads[0]
        return float(reads[torch.arange(len(tail)), torch.tensor(tail)].sum())

    def _check_width(self, width: int) -> None:
        """Refuse a row longer than the model's positions (it would wrap or fail inside)."""
        config = getattr(self.model, "config", None)
        limit = getattr(config, "max_position_embeddings", None) or getattr(
            config, "n_positions", None
        )
        if isinstance(limit, int) and width > limit:
            raise InputError(
                f"a prompt of {width} tokens exceeds the model's {limit} positions",
                location=self.location,
            )

    def _run_rows(
        self,
        rows: Sequence[Sequence[int]],
        starts: Sequence[int] | None = None,
        keep_cache: bool = False,
    ) -> Prefix:
        """One right-padded pass, one row per context, read from `starts` (default: last token)."""
        self._check_width(max(len(r) for r in rows))
        return run_rows(self.model, rows, self._pad, self.device, starts, keep_cache)

    def _hooked(self) -> bool:
        """Whether forward hooks are attached (Track 2): then passes keep whole rows."""
        if self._white_box or _GLOBAL_HOOKS:
            return True
        return any(m._forward_hooks or m._forward_pre_hooks for m in self.model.modules())

    @property
    def device(self) -> torch.device:
        """Device of the model's weights (inputs are moved there)."""
        first = next(self.model.parameters(), None)
        return first.device if first is not None else torch.device("cpu")

    # --- the one primitive the recipe needs -------------------------------------------------
    def next_option_probs(
        self, prompts: Sequence[list[str]], options: Sequence[str]
    ) -> torch.Tensor:
        """P(next word = option | prompt), chained over tokens, renormalised: (N, options).

        Single-token options are read from one pass at each prompt's last token. Longer ones
        are scored in one more pass over the prompts' cache (`_hf_batch.score_options`); with
        forward hooks attached (Track 2) every pass is instead a whole row per prompt, the
        prompts alone first and one pass per multi-token option after (`chain_per_option`),
        so injection hooks see the same rows and starts every time.
        """
        if self._hooked():
            return self.row_option_probs(prompts, [options] * len(prompts))
        heads, tails, whole_word = self._option_tokens(prompts, [options] * len(prompts))
        boundary = self._boundary if whole_word else None
        single = boundary is None and all(len(t) == 1 for row in tails for t in row)
        if single:
            first = self._run_rows(heads).next_logp
            logp = first.gather(1, torch.tensor([[t[0] for t in row] for row in tails]))
        else:  # every option token is fed: the last one needs a position too
            self._check_width(max(len(h) + len(t) for h, row in zip(heads, tails, strict=True)
                                  for t in row))  # fmt: skip
            prefix = self._run_rows(heads, keep_cache=True)
            logp = score_options(self.model, prefix, tails, self._pad, boundary).logp
        return self._renormalised(logp)

    def row_option_probs(
        self, prompts: Sequence[list[str]], options: Sequence[Sequence[str]]
    ) -> torch.Tensor:
        """`next_option_probs` with each prompt's own options (as many per prompt), whole rows.

        Every pass is a whole row per prompt, the prompts alone first (`chain_per_option`), so
        Track 2's hooks see one row per prompt at its own positions; the options may differ
        by row (text-world contexts of several tasks word a slot's values differently).
        """
        heads, tails, whole_word = self._option_tokens(prompts, options)
        boundary = self._boundary if whole_word else None
        return self._renormalised(chain_per_option(self._run_rows, heads, tails, boundary))

    def _option_tokens(
        self, prompts: Sequence[list[str]], options: Sequence[Sequence[str]]
    ) -> tuple[list[tuple[int, ...]], list[list[tuple[int, ...]]], bool]:
        """Prompt tokens, option tokens per prompt, and whether options are whole words.

        `options[i]` are prompt i's options (as many for every prompt).
        """
        splits = [[self._split(p, o) for o in row] for p, row in zip(prompts, options, strict=True)]
        whole_word = False
        rows = {(tuple(row), tuple(t for _, t in split))
                for row, split in zip(options, splits, strict=True)}  # fmt: skip
        for row_options, tails in rows:
            whole_word |= self._needs_word_boundary(row_options, tails)
        return [row[0][0] for row in splits], [[t for _, t in row] for row in splits], whole_word

    def _renormalised(self, logp: torch.Tensor) -> torch.Tensor:
        """The options' distribution; the mass left outside them goes to `last_off_option_mass`."""
        mass = logp.exp().sum(-1, keepdim=True)
        self.last_off_option_mass = float((1 - mass).max())
        # Renormalise in log space: exp(logp - logsumexp) stays exact when every option is
        # individually tiny (a randomly initialised model spreads mass over the vocabulary).
        return (logp - torch.logsumexp(logp, -1, keepdim=True)).exp()

    def _needs_word_boundary(
        self, options: Sequence[str], tails: Sequence[tuple[int, ...]]
    ) -> bool:
        """Whether one option's tokens begin another's, so the word's end must be scored.

        Raises:
            InputError: two options share their tokens, or one begins another and the
                tokenizer marks no word starts (a word-level vocabulary), so nothing
                separates them.
        """
        found = False
        for a, ta in zip(options, tails, strict=True):
            for b, tb in zip(options, tails, strict=True):
                if a == b or len(ta) > len(tb) or tb[: len(ta)] != ta:
                    continue
                if ta == tb or self._boundary is None:
                    raise InputError(
                        f"option {a!r} tokenizes as a prefix of {b!r} and the tokenizer marks "
                        "no word boundary, so chained token probabilities cannot separate them",
                        location=self.location,
                    )
                found = True
        return found

    @functools.cached_property
    def _boundary(self) -> torch.Tensor | None:
        """Ids of tokens that start a new word (or end the text); None when none are marked.

        Byte-level BPE marks a leading space with `Ġ` (newline `Ċ`, tab `ĉ`), SentencePiece
        with `▁`; a byte-fallback whitespace byte counts too. A word-level vocabulary marks
        nothing (every token is a word), and then there is no boundary to score.
        """
        return word_start_ids(self.tokenizer)

    def _fill_for_report(
        self, contexts: Sequence[StepContext]
    ) -> tuple[list[list[str]], dict[str, torch.Tensor]]:
        """The block filled over one cached prompt (in this module); slot by slot under hooks."""
        if self._hooked():
            return self.fill_slots(contexts)
        return fill_reusing_prefix(self, contexts)

    # --- positions in tokens (Track 2) ------------------------------------------------------
    def slot_probability(
        self, contexts: Sequence[StepContext], slot: str, value: str
    ) -> np.ndarray:
        """`LocalLMProxyAdapter.slot_probability` with whole rows per context in every pass.

        Track 2 compares injected against plain calls: both take the same (hook-safe) path,
        so their difference is the injection's, never a change of arithmetic.
        """
        self._white_box = True
        try:
            return super().slot_probability(contexts, slot, value)
        finally:
            self._white_box = False

    def read_positions(self, contexts: Sequence[StepContext]) -> list[int]:
        """The first slot is read at the last token of the report prompt (`<r>`)."""
        return [len(self.tokens(self.prompt_for_report(c))) - 1 for c in contexts]

    def step_start(self, context: StepContext) -> int:
        """Token index where the current step's observation begins (for injections)."""
        before = self.tokens(self._render(context.observations[:-1]))
        whole = self.tokens(self._render(context.observations))
        if whole[: len(before)] != before:
            raise InputError(
                "tokenizer merges across the step boundary; injection start is undefined",
                location=self.location,
            )
        return len(before)


# ------------------------------------------------------------------------------------------------
# A local Hugging Face model as an agent of the text world (`trb.world._text`).


class HFTextAgent:
    """A local causal LM acting in the text world: prompt-filled slot block, option probabilities.

    The spec's proxy tier elicits the slots "from the model's own chain of thought (parse, or
    prompt-fill)". A small model rarely writes a parsable block unprompted, so this agent fills
    it: after the task's text it writes each slot's label and takes the model's most probable
    words among the slot's options (`TextWorld.slot_options`, exact chained probabilities,
    `next_option_probs`). `act_text` appends the block (its own, or the one edited to r') and
    `Option:`, and reads the model's probabilities of the option keys.

    Args:
        scorer: The Hugging Face proxy adapter whose `next_option_probs` reads the model.
        name: Name in result rows.
    """

    tier = AdapterTier.PROXY

    def __init__(self, scorer: HFCausalLMProxyAdapter, name: str | None = None) -> None:
        self.scorer = scorer
        self.name = name or scorer.name
        self._blocks: dict[str, str] = {}
        """Slot blocks by prompt: the model is deterministic, and an un-overridden act asks for
        the block `emit_text` already filled (five forward passes or more on a CPU)."""

    @classmethod
    def from_path(
        cls, path: Path | str, name: str | None = None, *, device: str = "cpu",
        dtype: str = "float32",
    ) -> HFTextAgent:  # fmt: skip
        """Load a local `save_pretrained` folder (`load_hf_causal_lm`); nothing is downloaded."""
        return cls(HFCausalLMProxyAdapter.from_path(path, name, device=device, dtype=dtype))

    def emit_text(self, context: TextContext) -> str:
        """The slot block, each slot filled with the model's most probable words."""
        if context.prompt in self._blocks:
            return self._blocks[context.prompt]

        def one_context(prompts: Sequence[list[str]], options: Sequence[Sequence[str]]) -> Any:
            return self.scorer.next_option_probs(prompts, options[0])  # prefix reuse

        (lines,), _ = self._fill([context], one_context)
        self._blocks[context.prompt] = "\n".join(lines)
        return self._blocks[context.prompt]

    def _fill(
        self,
        contexts: Sequence[TextContext],
        score: Callable[[Sequence[list[str]], Sequence[Sequence[str]]], torch.Tensor],
        upto: str | None = None,
    ) -> tuple[list[list[str]], torch.Tensor | None]:
        """The slot block filled greedily, each slot with its most probable words, per context.

        Each slot's label follows the context's text and the lines so far; `score(prompts,
        options)` gives every context's probabilities of its own options. Stops at slot `upto`
        (its label written, its words not chosen) and returns the lines so far and that slot's
        probabilities (N, options); without `upto`, the whole block and None.
        """
        worlds = [text_world_for_task(c.task, c.dynamics) for c in contexts]
        lines: list[list[str]] = [[] for _ in contexts]
        for position, (slot, _label) in enumerate(worlds[0].slot_labels()):
            labels = [w.slot_labels()[position][1] for w in worlds]
            options = [w.slot_options(slot) for w in worlds]
            prompts = [["\n".join([c.prompt, *done, f"{label}:"])]
                       for c, done, label in zip(contexts, lines, labels, strict=True)]  # fmt: skip
            probs = score(prompts, options)
            if slot == upto:
                return lines, probs
            for done, label, row, p in zip(lines, labels, options, probs, strict=True):
                done.append(f"{label}: {row[int(p.argmax())]}")
        return lines, None

    def act_text(self, context: TextContext, reasoning: str | None) -> dict[str, float]:
        """P(option key | task text, slot block, `Option:`), renormalised over the keys."""
        keys = text_world_for_task(context.task, context.dynamics).option_keys
        return option_distribution(self.scorer, self._act_prompt(context, reasoning), keys)

    def continuation_logprob(
        self, context: TextContext, reasoning: str | None, continuation: str
    ) -> float:
        """The log-probability of `continuation` after the task text, slot block and `Option:`.

        The open-ended hook (`trb.adapter.LogProbAdapter`) in the text world: the same prompt
        `act_text` reads the options after, but the text's own probability, not renormalised
        over the option keys, so Track 1's paired LLR (`G_llr`) can be read from it.
        """
        return self.scorer.text_logprob([self._act_prompt(context, reasoning)], continuation)

    def _act_prompt(self, context: TextContext, reasoning: str | None) -> str:
        """The task's text, the slot block (its own, or the one edited to r') and `Option:`."""
        block = reasoning if reasoning is not None else self.emit_text(context)
        return f"{context.prompt}\n{block}\nOption:"

    # --- white-box access (Track 2), over the world's own rendering ------------------------
    @property
    def model(self) -> nn.Module:
        """The causal LM (Track 2 fits concept directions once per model)."""
        return self.scorer.model

    def hook_layers(self) -> list[nn.Module]:
        """The decoder blocks, whose outputs are the residual stream, in depth order."""
        return self.scorer.hook_layers()

    def slot_probability(
        self, contexts: Sequence[TextContext], slot: str, value: str
    ) -> np.ndarray:
        """P(the slot's words = `value`'s words), the block filled greedily up to that slot.

        What `emit_text` reads, one context per row: after the task's text each earlier slot
        takes its most probable words (under any injection: the greedy fill sees it too),
        then the slot's label; the probability is the value's words' among the slot's
        declared values as this task words them (`TextWorld.slot_words`), chained over
        tokens and renormalised. `slot` and `value` are r's (`goal` / `right`), so the
        concept labels are the world's slots. Every pass is a whole row per context
        (`row_option_probs`), hooks attached or not, so an injected call differs from a plain
        one by the injection only.
        """
        _, probs = self._fill(contexts, self.scorer.row_option_probs, upto=slot)
        if probs is None:
            raise ValueError(f"{slot!r} is not a slot of the text world's block")
        worlds = [text_world_for_task(c.task, c.dynamics) for c in contexts]
        wanted = [w.slot_options(slot).index(w.slot_words(slot)[value]) for w in worlds]
        return probs[torch.arange(len(contexts)), torch.tensor(wanted)].numpy()

    def read_positions(self, contexts: Sequence[TextContext]) -> list[int]:
        """The first slot is read at the last token of the prompt ending in its label."""
        return [len(self._first_slot_tokens(c)) - 1 for c in contexts]

    def step_starts(self, contexts: Sequence[TextContext]) -> list[int]:
        """Token index where each context's current step line begins (injections start there).

        Raises:
            InputError: the tokenizer merges across the line boundary (the start is undefined).
        """
        starts = []
        for c in contexts:
            world = text_world_for_task(c.task, c.dynamics)
            before = self.scorer.tokens([c.prompt[: world.current_step_offset(c.prompt)]])
            if self._first_slot_tokens(c)[: len(before)] != before:
                raise InputError(
                    "tokenizer merges across the current step's line; injection start is "
                    "undefined", location=self.scorer.location,
                )  # fmt: skip
            starts.append(len(before))
        return starts

    def _first_slot_tokens(self, context: TextContext) -> tuple[int, ...]:
        """Tokens of the prompt the block's first slot is read after (`slot_probability`)."""
        world = text_world_for_task(context.task, context.dynamics)
        label = world.slot_labels()[0][1]
        return self.scorer.tokens(["\n".join([context.prompt, f"{label}:"])])


def option_distribution(
    scorer: HFCausalLMProxyAdapter, prompt: str, options: Sequence[str]
) -> dict[str, float]:
    """P(option | prompt) for each option, chained over its tokens, renormalised over them.

    How both Hugging Face agents read an action: every token of a multi-token name counts
    (`next_option_probs`), so a name the tokenizer splits is not favoured or penalised by it.
    """
    probs = scorer.next_option_probs([[prompt]], options)[0]
    return {o: float(p) for o, p in zip(options, probs.tolist(), strict=True)}


# ------------------------------------------------------------------------------------------------
# A local Hugging Face model as an agent of a world with its own slots (`trb.world._slots`).

SLOT_FILLS = ("greedy", "generate")
"""How `HFSlotAgent` gets its slot block: filled greedily over each slot's values, or written by
the model (greedy decoding) and parsed strictly."""
GENERATED_TOKENS = 200
"""Most tokens the model writes for its reasoning and slot block (`slot_fill = "generate"`)."""


def number_words(spec: NumberSlot) -> list[str]:
    """The values a greedy fill chooses a number slot's value among, as the block writes them.

    Every integer of the range when it spans 10 to 100 units (an ETA in hours, a count); 101
    evenly spaced integers past that; 11 evenly spaced points (tenths of the range) below it
    (a probability). A fill needs a finite set to score; these keep a stated number within
    half a grid step, which is finer than Track 1's slot-accuracy tolerance on a range.
    """
    span = spec.high - spec.low
    if span >= 10:
        points = min(int(span), 100) + 1
        values = [round(spec.low + i * span / (points - 1)) for i in range(points)]
    else:
        values = [round(spec.low + i * span / 10, 6) for i in range(11)]
    return list(dict.fromkeys(f"{v:g}" for v in values))


def slot_words(world: SlotWorld, slot: str) -> list[str]:
    """A categorical or number slot's candidate values, with `null` where it is nullable.

    Raises:
        SlotWorldError: a free-text slot (no finite set to fill it from: ask the model to write
            the block, `slot_fill = "generate"`).
    """
    spec = world.declaration.slots[slot]
    if isinstance(spec, CategoricalSlot):
        words = list(spec.values)
    elif isinstance(spec, NumberSlot):
        words = number_words(spec)
    else:
        raise SlotWorldError(
            f"world {world.declaration.world_id}: free-text slot {slot!r} has no values to fill "
            'greedily; let the model write its block (settings.slot_fill = "generate")'
        )
    return [*words, NULL_WORD] if getattr(spec, "nullable", False) else words


class HFSlotAgent:
    """A local causal LM acting in a world with its own slots (`SlotWorld`): its two hooks.

    The world's text (`render_context`, `render_report`, strict `parse_report`) with the
    Hugging Face text agent's recipe:

    - `emit_r`: after the rendered context the slot block is filled (`slot_fill = "greedy"`,
      as `HFTextAgent` fills the text world's block: each slot's name, then the model's most
      probable value among the slot's values, `slot_words`), or the model writes its reasoning
      and block (`"generate"`, greedy decoding) and the block is parsed strictly. A reply
      without a block that fits the slot schema raises `SlotBlockError`: a format failure,
      so the model is not evaluable, never "ungoverned".
    - `act(r')`: the own block (and the reasoning around it) with the block replaced by r',
      then `Action:`; the distribution over the world's K action names is the model's
      probability of each name's tokens, renormalised over the K names.
    - `continuation_logprob`: the same prompt's log-probability of an action name (not
      renormalised), so Track 1's paired LLR (`G_llr`) is read as in the text world; where
      the world's actions are open-ended, of the recorded free-text continuation after
      `Action:` (the only Track 1 figure there: `act` has no K names to renormalise over).

    Args:
        scorer: The Hugging Face proxy adapter whose `next_option_probs` reads the model.
        world: The slot world the trace is recorded in.
        slot_fill: `greedy` or `generate` (`SLOT_FILLS`).
        name: Name in result rows.
    """

    tier = AdapterTier.PROXY
    supports_override = True

    def __init__(
        self,
        scorer: HFCausalLMProxyAdapter,
        world: SlotWorld,
        slot_fill: str = "greedy",
        name: str | None = None,
    ) -> None:
        if slot_fill not in SLOT_FILLS:
            raise ValueError(f"slot_fill must be one of {SLOT_FILLS}, got {slot_fill!r}")
        self.scorer = scorer
        self.world = world
        self.slot_fill = slot_fill
        self.name = name or scorer.name
        self._replies: dict[str, str] = {}
        """The model's reply by rendered context: it is deterministic, and every act on a
        context reads the reply `emit_r` already produced."""

    def seed(self, value: int) -> None:
        """Nothing to seed: greedy filling and decoding are deterministic."""

    def reply(self, context: SlotContext) -> str:
        """The model's own reply after the rendered context: its (filled or written) block."""
        prompt = self.world.render_context(context)
        if prompt not in self._replies:
            fill = self._filled if self.slot_fill == "greedy" else self._generated
            self._replies[prompt] = fill(prompt)
        return self._replies[prompt]

    def emit_r(self, context: SlotContext) -> SlotReport:
        """The reply's slot block, read strictly against the world's slot schema."""
        return self.world.parse_report(self.reply(context))

    def act(self, context: SlotContext, r_override: SlotReport | None = None) -> dict[str, float]:
        """P(action name | context, reply with its block set to r', `Action:`) over the K names."""
        actions = self.world.declaration.action_space.actions
        return option_distribution(self.scorer, self._act_prompt(context, r_override), actions)

    def continuation_logprob(
        self, context: SlotContext, r_override: SlotReport | None, continuation: str
    ) -> float:
        """The log-probability of `continuation` where `act` reads the action.

        An action name, or free text where the world's actions are open-ended.
        """
        return self.scorer.text_logprob([self._act_prompt(context, r_override)], continuation)

    def _act_prompt(self, context: SlotContext, r_override: SlotReport | None) -> str:
        """The rendered context, the reply (its block edited to r' when given) and `Action:`.

        Raises:
            SlotBlockError: the reply holds no valid block (nothing to act after or edit).
        """
        text = self.reply(context)
        self.world.parse_report(text)
        if r_override is not None:
            start, end = self.world.block_span(text)
            text = text[:start] + self.world.render_report(r_override) + text[end:]
        return f"{self.world.render_context(context)}\n{text}\nAction:"

    def _filled(self, prompt: str) -> str:
        """The slot block after `prompt`, each slot given its most probable value in turn."""
        lines = [SLOT_BLOCK_OPEN]
        for slot in self.world.declaration.slots:
            words = slot_words(self.world, slot)
            asked = "\n".join([prompt, *lines, f"{slot}:"])
            probs = option_distribution(self.scorer, asked, words)
            lines.append(f"{slot}: {max(words, key=probs.__getitem__)}")
        return "\n".join([*lines, SLOT_BLOCK_CLOSE])

    def _generated(self, prompt: str) -> str:
        """What the model writes after `prompt` by greedy decoding (at most `GENERATED_TOKENS`)."""
        scorer = self.scorer
        head = scorer.tokens([prompt + "\n"])
        scorer._check_width(len(head) + GENERATED_TOKENS)
        ids = torch.tensor([head], device=scorer.device)
        with torch.no_grad():
            out = scorer.model.generate(  # type: ignore[operator]
                input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                max_new_tokens=GENERATED_TOKENS, pad_token_id=scorer._pad,
            )  # fmt: skip
        return scorer.tokenizer.decode(out[0, len(head) :], skip_special_tokens=True)  # type: ignore[attr-defined]
