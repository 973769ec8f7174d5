"""Where the decoder blocks of a Hugging Face causal LM live (Track 2 hooks them)."""

from __future__ import annotations

from typing import Any

from torch import nn

from trustbench.errors import InputError

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
