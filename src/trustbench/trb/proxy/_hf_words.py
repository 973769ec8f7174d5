"""Which tokens start a new word: the whole-word scoring of options that begin one another."""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

import torch

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
