"""The Hugging Face adapter as it computed before prefix reuse: the slow reference path.

`ReferenceHFAdapter` keeps the earlier arithmetic, copied as it was: every pass is a whole
right-padded row per prompt returning a float64 log-softmax over every position and the
whole vocabulary; one pass for the prompts, then one per multi-token option; the slot block
filled slot by slot, each slot a fresh pass of the prompt so far. The tests compare the
adapter's fast paths (`_hf_batch`, `_hf_emit`) against it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from trustbench.trb.adapter._protocol import StepContext
from trustbench.trb.proxy import HFCausalLMProxyAdapter


class ReferenceHFAdapter(HFCausalLMProxyAdapter):
    """`HFCausalLMProxyAdapter` with the earlier slow, full-tensor passes."""

    passes = 0
    """Forward passes run (class-wide; reset by the caller)."""

    def _full_forward(self, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        """Log-probabilities (N, T, V) in float64; one row per context, right-padded."""
        width = max(len(r) for r in rows)
        self._check_width(width)
        ids = torch.full((len(rows), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = 1
        ReferenceHFAdapter.passes += 1
        with torch.no_grad():
            logits = self.model(input_ids=ids, attention_mask=mask).logits
        return torch.log_softmax(logits.double(), -1)

    def next_option_probs(
        self, prompts: Sequence[list[str]], options: Sequence[str]
    ) -> torch.Tensor:
        """The earlier chain: the prompts, then one whole pass per multi-token option."""
        splits = [[self._split(p, o) for o in options] for p in prompts]
        whole_word = False
        for tails in {tuple(t for _, t in row) for row in splits}:
            whole_word |= self._needs_word_boundary(options, tails)
        heads = [row[0][0] for row in splits]
        first = self._full_forward(heads)
        logp = torch.empty((len(prompts), len(options)), dtype=torch.float64)
        for k in range(len(options)):
            tails = [row[k][1] for row in splits]
            if not whole_word and all(len(t) == 1 for t in tails):
                for i, (h, t) in enumerate(zip(heads, tails, strict=True)):
                    logp[i, k] = first[i, len(h) - 1, t[0]]
                continue
            keep = 0 if whole_word else 1
            rows = [h + t[: len(t) - keep] for h, t in zip(heads, tails, strict=True)]
            lp = self._full_forward(rows)
            for i, (h, t) in enumerate(zip(heads, tails, strict=True)):
                logp[i, k] = sum(float(lp[i, len(h) - 1 + j, tok]) for j, tok in enumerate(t))
                if whole_word:
                    assert self._boundary is not None
                    after = lp[i, len(h) + len(t) - 1, self._boundary]
                    logp[i, k] += float(torch.logsumexp(after, -1))
        return self._renormalised(logp)

    def _fill_for_report(
        self, contexts: Sequence[StepContext]
    ) -> tuple[list[list[str]], dict[str, torch.Tensor]]:
        return self.fill_slots(contexts)
