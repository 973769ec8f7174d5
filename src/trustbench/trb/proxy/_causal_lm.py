"""A minimal local causal language model and its folder format (no downloads, no transformers).

The local proxy adapter needs only two things from a model: a torch `nn.Module` that maps
token ids (B, T) to next-token logits (B, T, V), exposing its transformer blocks as
`blocks` so white-box hooks can reach them, and a tokenizer callable that maps text to ids.
`TinyCausalLM` and `WordTokenizer` are that interface's reference implementation; the token
world's baselines are trained into it.

Folder format (`save_local_lm` / `load_local_lm`):

    config.json   {"format": "trustbench-tiny-causal-lm/1", "vocab_size", "d_model", ...}
    vocab.json    the tokenizer's word list (index = token id)
    model.pt      the state_dict (torch.save), loaded with weights_only=True
    card.json     name, recipe, SHA-256 of model.pt, training summary

A folder whose `model.pt` no longer matches the SHA-256 in its card is refused.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trustbench.errors import CheckFailed, InputError

FORMAT = "trustbench-tiny-causal-lm/1"
"""The `format` value in config.json this loader reads."""


class WordTokenizer:
    """Whitespace word tokenizer over a fixed vocabulary; unknown words map to `<unk>`.

    Args:
        vocab: Words in id order; must contain `<unk>` and `<pad>`.
    """

    def __init__(self, vocab: list[str]) -> None:
        self.vocab = list(vocab)
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.unk = self.index["<unk>"]
        self.pad = self.index["<pad>"]

    def __call__(self, text: str) -> list[int]:
        """Token ids of a text (one per whitespace-separated word)."""
        return [self.index.get(w, self.unk) for w in text.split()]

    def id_of(self, word: str) -> int:
        """The id of one word (`<unk>` when outside the vocabulary)."""
        return self.index.get(word, self.unk)


class Block(nn.Module):
    """Pre-norm transformer block; returns a plain tensor (B, T, D)."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(self, x: torch.Tensor, causal: torch.Tensor) -> torch.Tensor:
        """Causal self-attention then MLP, both residual."""
        y = self.ln1(x)
        x = x + self.attn(y, y, y, attn_mask=causal, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyCausalLM(nn.Module):
    """Token + position embeddings, `n_layers` blocks, final norm and an output head.

    Args:
        vocab_size: Vocabulary size.
        d_model: Residual width.
        n_layers: Number of blocks (the white-box layers are `blocks[0..n_layers-1]`).
        n_heads: Attention heads per block.
        max_len: Longest sequence (position embeddings).
    """

    def __init__(
        self, vocab_size: int, d_model: int, n_layers: int, n_heads: int, max_len: int
    ) -> None:
        super().__init__()
        self.config = {
            "vocab_size": vocab_size,
            "d_model": d_model,
            "n_layers": n_layers,
            "n_heads": n_heads,
            "max_len": max_len,
        }
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Next-token logits (B, T, V); position t sees positions <= t only."""
        t = ids.shape[1]
        if t > self.config["max_len"]:
            raise InputError(f"sequence of {t} tokens exceeds max_len {self.config['max_len']}")
        x = self.embed(ids) + self.pos(torch.arange(t, device=ids.device))
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=ids.device), diagonal=1)
        for block in self.blocks:
            x = block(x, causal)
        return self.head(self.norm(x))


def save_local_lm(
    folder: Path, model: TinyCausalLM, tokenizer: WordTokenizer, card: dict[str, Any]
) -> dict[str, Any]:
    """Write a model folder; returns the card with the weights' SHA-256 added."""
    folder.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    raw = buffer.getvalue()
    (folder / "model.pt").write_bytes(raw)
    (folder / "config.json").write_text(
        json.dumps({"format": FORMAT, **model.config}, indent=2), encoding="utf-8"
    )
    (folder / "vocab.json").write_text(json.dumps(tokenizer.vocab), encoding="utf-8")
    card = {**card, "sha256": hashlib.sha256(raw).hexdigest()}
    (folder / "card.json").write_text(json.dumps(card, indent=2), encoding="utf-8")
    return card


def load_local_lm(folder: Path) -> tuple[TinyCausalLM, WordTokenizer, dict[str, Any]]:
    """Load a model folder written by `save_local_lm` (local files only, SHA-256 checked).

    Raises:
        InputError: a missing file or an unknown format.
        CheckFailed: the weights differ from the SHA-256 in the card.
    """
    folder = Path(folder)
    for name in ("config.json", "vocab.json", "model.pt", "card.json"):
        if not (folder / name).is_file():
            raise InputError(f"local model folder lacks {name}", location=str(folder))
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    if config.get("format") != FORMAT:
        raise InputError(
            f"config.json format is {config.get('format')!r}, expected {FORMAT!r}",
            location=str(folder / "config.json"),
        )
    card = json.loads((folder / "card.json").read_text(encoding="utf-8"))
    raw = (folder / "model.pt").read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != card.get("sha256"):
        raise CheckFailed(
            f"model.pt SHA-256 {digest[:12]}... differs from card.json "
            f"{str(card.get('sha256'))[:12]}...",
            location=str(folder / "model.pt"),
        )
    model = TinyCausalLM(**{k: config[k] for k in TinyCausalLM_ARGS})
    model.load_state_dict(torch.load(io.BytesIO(raw), weights_only=True))
    model.eval()
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    return model, WordTokenizer(vocab), card


TinyCausalLM_ARGS = ("vocab_size", "d_model", "n_layers", "n_heads", "max_len")
"""Constructor arguments stored in config.json."""
