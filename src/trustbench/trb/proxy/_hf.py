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

import numpy as np
import torch
from torch import nn

from trustbench.errors import InputError
from trustbench.trb.adapter._schema import StepContext
from trustbench.trb.proxy._device import resolve_device_dtype
from trustbench.trb.proxy._hf_batch import Prefix, chain_per_option, run_rows, score_options
from trustbench.trb.proxy._hf_emit import fill_reusing_prefix
from trustbench.trb.proxy._hf_layers import decoder_layers
from trustbench.trb.proxy._hf_words import word_start_ids
from trustbench.trb.proxy._local import HistoryRenderer, LocalLMProxyAdapter, Template

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
        heads, tails, whole_word = self._option_tokens(prompts, options)
        boundary = self._boundary if whole_word else None
        single = boundary is None and all(len(t) == 1 for row in tails for t in row)
        if self._hooked():
            logp = chain_per_option(self._run_rows, heads, tails, boundary)
        elif single:
            first = self._run_rows(heads).next_logp
            logp = first.gather(1, torch.tensor([[t[0] for t in row] for row in tails]))
        else:  # every option token is fed: the last one needs a position too
            self._check_width(max(len(h) + len(t) for h, row in zip(heads, tails, strict=True)
                                  for t in row))  # fmt: skip
            prefix = self._run_rows(heads, keep_cache=True)
            logp = score_options(self.model, prefix, tails, self._pad, boundary).logp
        return self._renormalised(logp)

    def _option_tokens(
        self, prompts: Sequence[list[str]], options: Sequence[str]
    ) -> tuple[list[tuple[int, ...]], list[list[tuple[int, ...]]], bool]:
        """Prompt tokens, option tokens per prompt, and whether options are whole words."""
        splits = [[self._split(p, o) for o in options] for p in prompts]
        whole_word = False
        for tails in {tuple(t for _, t in row) for row in splits}:
            whole_word |= self._needs_word_boundary(options, tails)
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
        """The block filled over one cached prompt (`_hf_emit`); slot by slot under hooks."""
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
