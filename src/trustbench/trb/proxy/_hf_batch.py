"""Forward passes of the Hugging Face adapter that read only what is used, and reuse a prefix.

Two costs dominated the adapter (issue 35): a float64 log-softmax over every position and the
whole vocabulary of every row, when a read needs one position per row; and one forward pass
of the full prompt per multi-token option per slot, about 25 per self-report, although every
option of a slot shares the prompt before it. Here:

- `run_rows` runs right-padded rows once, asks the model for logits only at each row's last
  position (`logits_to_keep`, where the model's forward takes it), and keeps the model's
  key/value cache when asked to;
- `score_options` scores every option of a slot in one batched pass over that cache: each
  context's options form one row, a tree of their tokens (shared leading tokens once), where
  a 4D mask lets each token see only context n's cached prefix and its own option's earlier
  tokens, at its true positions (`position_ids`), pads in the cache masked out;
- `Scored.advance` keeps the chosen option's tokens visible per context (the others stay in
  the cache, masked), so the next slot continues from the cache instead of running the
  prompt again;
- a `Lead` (`lead_prefix`) puts the prompt rows at the head of the first slot's pass, the
  option tree after them, so the prompt costs no pass of its own (a pass has a fixed cost of
  about a quarter of a forward on SmolLM2). A self-report is one pass per slot or slot pair.

Only the read positions are cast to float64 before the log-softmax (the model's logits stay in
its dtype); the sums are the same as on the full tensor. A padded key is masked to weight zero,
so a row's result equals the unpadded row's up to float rounding of differently shaped matrix
products (about 1e-7 in float32).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


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
