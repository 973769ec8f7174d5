"""The Hugging Face adapter's self-report: every slot continued from one cached prompt.

`LocalLMProxyAdapter.fill_slots` fills the block slot by slot, each slot a fresh pass of the
whole prompt so far and, on a subword tokenizer, one more pass per multi-token option: about
25 passes of the full prompt per self-report on SmolLM2. Here the prompt `history <r>` runs
once, in the first slot's pass ahead of its options (`_hf_batch.Lead`), with its key/value
cache kept; each later slot scores all its options in one pass over that cache
(`_hf_batch.score_options`, only the options' tokens are new; two adjacent slots with few
options, goal and belief, share one), and the chosen option's row becomes the next
slot's prefix. The tokens every option of a slot begins with (` conf`, `=`) are run once, at
the end of the previous slot's rows (or of the prompt) when those are no more than this
slot's, so a row holds only an option's own tokens: their log-probability is added to every
option's chain (`Prefix.pending`), as the per-option chain counts it. The words, the probabilities
and their order are the ones `fill_slots` gives (the tests keep the slow path as reference).

The self slot is scored over its first two words, as in `fill_slots`, but all three rows are
run: at step 0 the block says `na`, and that row's cache is the one continued.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from trustbench.errors import InputError
from trustbench.trb.adapter._schema import StepContext
from trustbench.trb.proxy._hf_batch import Prefix, lead_prefix, score_options

if TYPE_CHECKING:
    from trustbench.trb.proxy._hf import HFCausalLMProxyAdapter

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
    heads, tails, whole_word = adapter._option_tokens(prompts, options[:scored])
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
