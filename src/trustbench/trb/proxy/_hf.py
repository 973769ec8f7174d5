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

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trustbench.errors import InputError
from trustbench.trb.adapter._schema import StepContext
from trustbench.trb.proxy._device import resolve_device_dtype
from trustbench.trb.proxy._local import HistoryRenderer, LocalLMProxyAdapter, Template

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

INSTALL_HINT = (
    "install the optional extra: pip install -e '.[hf]' in a clone (README: Installing without "
    "make)"
)
"""What to do when `transformers` is missing."""

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

    def _forward(self, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        """Log-probabilities (N, T, V) in float64; one row per context, right-padded."""
        width = max(len(r) for r in rows)
        config = getattr(self.model, "config", None)
        limit = getattr(config, "max_position_embeddings", None) or getattr(
            config, "n_positions", None
        )
        if isinstance(limit, int) and width > limit:
            raise InputError(
                f"a prompt of {width} tokens exceeds the model's {limit} positions",
                location=self.location,
            )
        ids = torch.full((len(rows), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = 1
        device = self.device
        with torch.no_grad():
            logits = self.model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
        # float64 log-softmax of the model's logits (whatever their dtype), read on the CPU.
        return torch.log_softmax(logits.double(), -1).cpu()

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

        The first forward pass is the prompts alone (the pass Track 2 captures); every
        option longer than one token (every option, when a word boundary is scored) adds one
        pass of the prompt and the option's tokens. Each pass has one row per prompt, so
        injection hooks see the same rows and starts every time.
        """
        splits = [[self._split(p, o) for o in options] for p in prompts]
        whole_word = False
        for tails in {tuple(t for _, t in row) for row in splits}:
            whole_word |= self._needs_word_boundary(options, tails)
        heads = [row[0][0] for row in splits]
        first = self._forward(heads)
        logp = torch.empty((len(prompts), len(options)), dtype=torch.float64)
        for k in range(len(options)):
            tails = [row[k][1] for row in splits]
            if not whole_word and all(len(t) == 1 for t in tails):
                for i, (h, t) in enumerate(zip(heads, tails, strict=True)):
                    logp[i, k] = first[i, len(h) - 1, t[0]]
                continue
            keep = 0 if whole_word else 1  # the boundary is read after the last token
            lp = self._forward([h + t[: len(t) - keep] for h, t in zip(heads, tails, strict=True)])
            for i, (h, t) in enumerate(zip(heads, tails, strict=True)):
                # Position len(h) - 1 + j predicts token t[j] (0-based j).
                logp[i, k] = sum(float(lp[i, len(h) - 1 + j, tok]) for j, tok in enumerate(t))
                if whole_word:
                    after = lp[i, len(h) + len(t) - 1, self._boundary]
                    logp[i, k] += float(torch.logsumexp(after, -1))
        probs = logp.exp()
        mass = probs.sum(-1, keepdim=True)
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
        vocab: dict[str, int] = self.tokenizer.get_vocab()  # type: ignore[attr-defined]
        ids = {i for token, i in vocab.items() if token.startswith(WORD_START_MARKERS)}
        if not ids:
            return None
        eos = getattr(self.tokenizer, "eos_token_id", None)
        if eos is not None:
            ids.add(int(eos))
        return torch.tensor(sorted(ids))

    # --- positions in tokens (Track 2) ------------------------------------------------------
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
