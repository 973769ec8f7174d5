"""Proxy adapter over a local causal LM: slot-block prompting with exact option probabilities.

The recipe is the chat proxy's (spec §2, CoT perturbation), with exact numbers because the
logits are at hand:

- `emit_r`: prompt `history <r>`, then fill the slot block one slot at a time, each from the
  model's next-token distribution restricted to that slot's words (argmax for goal, belief
  and plan; the expectation over `conf=k` for confidence; P(self=1) for caused_by_self).
- `act(context, r_override)`: prompt `history <r> slots(r') </r> <act>` where only the slot
  span is re-rendered, and return the next-token probabilities of the three action words,
  renormalised over them (the mass left on other words is kept in `last_off_option_mass`).
- `act_without_r`: the no-r ablation for a proxy: the slot span removed (`history <act>`).

Two templates serve two baselines with the same weights: `direct` (instruct: with no
override the model acts straight from the history) and `reasoning-first` (CoT-prompted:
with no override the model's own slot block is generated first and acted on).

White-box hooks: `hook_layers()` returns the transformer blocks, so Track 2 can read and
inject hidden states with plain torch forward hooks.

Slot encoding: the block is filled and rendered in `self.encoding` (the standard one unless
`use_encoding` sets another, as Track 6's `transfer_encoding` context does). A word-level
vocabulary without the encoding's words cannot be asked in it: `use_encoding` refuses
(`SlotEncodingUnsupported`), rather than letting every unknown word read as `<unk>`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from trustbench.trb.adapter._protocol import AdapterTier
from trustbench.trb.adapter._schema import ACTIONS, Observation, SelfReport, StepContext
from trustbench.trb.proxy._causal_lm import load_local_lm
from trustbench.trb.proxy._slots import (
    CONF_LEVELS,
    OPEN,
    STANDARD,
    SlotEncoding,
    SlotEncodingUnsupported,
    render_slots,
    report_from_words,
)

Template = Literal["direct", "reasoning-first"]
HistoryRenderer = Callable[[tuple[Observation, ...]], list[str]]


class LocalLMProxyAdapter:
    """A `proxy`-tier adapter around a local causal LM (`nn.Module` + tokenizer callable).

    Args:
        model: Maps ids (B, T) to logits (B, T, V); its blocks are `model.blocks`.
        tokenizer: Maps text to ids; must offer `id_of(word)` and `pad`.
        name: Name in result rows.
        render_history: Renders a context's observations as words (the token world's).
        template: `direct` (instruct) or `reasoning-first` (CoT-prompted / CoT-finetuned).
        memo: Results cache to share between adapters over the *same weights* (two
            templates): reports and overridden actions do not depend on the template.
    """

    tier = AdapterTier.PROXY
    supports_override = True
    ablation_kind = "slot span removed from the prompt (act straight from the history)"

    def __init__(
        self,
        model: nn.Module,
        tokenizer: object,
        name: str,
        render_history: HistoryRenderer,
        template: Template = "reasoning-first",
        memo: dict[Any, Any] | None = None,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.template = template
        self._render = render_history
        self.memo: dict[Any, Any] = {} if memo is None else memo
        self.last_off_option_mass: float | None = None
        """Largest probability mass outside the option words in the last batch (diagnostic)."""
        self.encoding: SlotEncoding = STANDARD
        """The slot encoding the block is filled and rendered in (`use_encoding`)."""

    def use_encoding(self, encoding: SlotEncoding) -> None:
        """Fill and render the slot block in `encoding` from now on.

        Raises:
            SlotEncodingUnsupported: a word of the encoding is outside the model's
                vocabulary (it would read as `<unk>`, every option alike).
        """
        self._check_vocabulary(encoding)
        self.encoding = encoding

    def _word_ids(self, word: str) -> list[int]:
        """Token ids of one word (a word-level tokenizer: one id)."""
        return [self.tokenizer.id_of(word)]  # type: ignore[attr-defined]

    def _check_vocabulary(self, encoding: SlotEncoding) -> None:
        # `unk` on a word-level tokenizer, `unk_token_id` on a Hugging Face one (whose
        # subword vocabulary usually spells any word; then nothing is missing).
        unk = getattr(self.tokenizer, "unk", getattr(self.tokenizer, "unk_token_id", None))
        words = [w for options in encoding.options.values() for w in options]
        missing = [w for w in words if unk is not None and unk in self._word_ids(w)]
        if missing:
            raise SlotEncodingUnsupported(
                f"{self.name}: its vocabulary lacks {len(missing)} word(s) of the "
                f"{encoding.name!r} slot encoding (e.g. {missing[0]!r}); a word-level model "
                "cannot be asked in a language of self-report it has no words for"
            )

    @classmethod
    def from_folder(
        cls, folder: Path, name: str, render_history: HistoryRenderer, template: Template
    ) -> LocalLMProxyAdapter:
        """Load a model folder (see `proxy._causal_lm`) from local disk; nothing is downloaded."""
        model, tokenizer, _ = load_local_lm(folder)
        return cls(model, tokenizer, name, render_history, template)

    def seed(self, value: int) -> None:
        """Exact probabilities, no sampling: nothing to seed."""

    def hook_layers(self) -> list[nn.Module]:
        """The blocks Track 2 hooks, in depth order."""
        return list(self.model.blocks)  # type: ignore[arg-type]

    def _bound_memo(self, limit: int = 200_000) -> None:
        if len(self.memo) > limit:
            self.memo.clear()

    # --- batched primitives -----------------------------------------------------------------
    def _ids(self, words: list[str]) -> list[int]:
        return [self.tokenizer.id_of(w) for w in words]  # type: ignore[attr-defined]

    def next_option_probs(
        self, prompts: Sequence[list[str]], options: Sequence[str]
    ) -> torch.Tensor:
        """P(next word = option | prompt), renormalised over the options: (N, len(options))."""
        width = max(len(p) for p in prompts)
        pad = self.tokenizer.pad  # type: ignore[attr-defined]
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, : len(p)] = torch.tensor(self._ids(p))
        last = torch.tensor([len(p) - 1 for p in prompts])
        with torch.no_grad():
            logits = self.model(ids)[torch.arange(len(prompts)), last].double()
        probs = torch.softmax(logits, -1)[:, self._ids(list(options))]
        mass = probs.sum(-1, keepdim=True)
        self.last_off_option_mass = float((1 - mass).max())
        return probs / mass

    def prompt_for_report(self, context: StepContext) -> list[str]:
        """`history <r>`: where the slot block starts."""
        return [*self._render(context.observations), OPEN]

    def step_start(self, context: StepContext) -> int:
        """Token index where the current step's observation begins (for injections)."""
        return len(self._render(context.observations[:-1])) if context.t else 1

    def fill_slots(
        self, contexts: Sequence[StepContext], upto: str | None = None
    ) -> tuple[list[list[str]], dict[str, torch.Tensor]]:
        """Greedy slot filling, batched; stops before slot `upto` when given.

        Returns:
            The prompts so far and each filled slot's option probabilities (N, options).
        """
        prompts = [self.prompt_for_report(c) for c in contexts]
        probs: dict[str, torch.Tensor] = {}
        for slot, options in self.encoding.options.items():
            if slot == upto:
                break
            p = self.next_option_probs(prompts, options[:2] if slot == "self" else options)
            probs[slot] = p
            for i, c in enumerate(contexts):
                word = options[int(p[i].argmax())]
                if slot == "self" and c.t == 0:
                    word = options[2]  # "not applicable": no previous outcome at step 0
                prompts[i] = [*prompts[i], word]
        return prompts, probs

    def _fill_for_report(
        self, contexts: Sequence[StepContext]
    ) -> tuple[list[list[str]], dict[str, torch.Tensor]]:
        """The whole block filled for `emit_many` (an adapter may fill it faster, same result)."""
        return self.fill_slots(contexts)

    def emit_many(self, contexts: Sequence[StepContext]) -> list[SelfReport]:
        """`emit_r` for many contexts in one batch per slot."""
        self._bound_memo()
        enc = self.encoding
        # Keyed by observations: identical contexts (the viability measure sends n_roll copies
        # of each) are filled once.
        todo = list({c.observations: c for c in contexts
                     if ("emit", enc.name, c.observations) not in self.memo}.values())  # fmt: skip
        if todo:
            prompts, probs = self._fill_for_report(todo)
            levels = torch.arange(CONF_LEVELS, dtype=torch.float64) / (CONF_LEVELS - 1)
            for i, c in enumerate(todo):
                # The filled words in block order -> value words per canonical slot.
                words = dict(zip(enc.order, prompts[i][-len(enc.order) :], strict=True))
                stated = report_from_words({s: w.split("=", 1)[1] for s, w in words.items()}, enc)
                self.memo[("emit", enc.name, c.observations)] = stated.model_copy(update={
                    "confidence": float((probs["conf"][i] * levels).sum().clamp(0, 1)),
                    "caused_by_self": None if c.t == 0 else float(probs["self"][i][1]),
                })  # fmt: skip
        return [self.memo[("emit", enc.name, c.observations)] for c in contexts]

    def act_many(
        self, contexts: Sequence[StepContext], overrides: Sequence[SelfReport | None]
    ) -> list[dict[str, float]]:
        """`act` for many contexts in one batch (cached per context and override)."""
        self._bound_memo()
        keys = [
            ("act", self.encoding.name, c.observations, r if r is not None else self.template)
            for c, r in zip(contexts, overrides, strict=True)
        ]
        todo = {}
        for key, c, r in zip(keys, contexts, overrides, strict=True):
            if key not in self.memo and key not in todo:
                todo[key] = (c, r)
        if todo:
            prompts = []
            for c, r in todo.values():
                history = self._render(c.observations)
                if r is None and self.template == "direct":
                    prompts.append([*history, "<act>"])
                    continue
                slots = render_slots(r if r is not None else self.emit_many([c])[0], self.encoding)
                prompts.append([*history, *slots, "<act>"])
            p = self.next_option_probs(prompts, ACTIONS)
            for key, row in zip(todo, p, strict=True):
                self.memo[key] = {a: float(v) for a, v in zip(ACTIONS, row, strict=True)}
        return [dict(self.memo[k]) for k in keys]

    def act_without_r_many(self, contexts: Sequence[StepContext]) -> list[dict[str, float]]:
        """The no-r ablation: act with the slot span removed from the prompt."""
        prompts = [[*self._render(c.observations), "<act>"] for c in contexts]
        p = self.next_option_probs(prompts, ACTIONS)
        return [{a: float(v) for a, v in zip(ACTIONS, row, strict=True)} for row in p]

    # --- white-box access (Track 2) ------------------------------------------------------
    def slot_probability(
        self, contexts: Sequence[StepContext], slot: str, value: str
    ) -> np.ndarray:
        """P(slot word = `slot=value`) when the block is filled greedily up to that slot.

        `slot` and `value` are canonical (standard-encoding) names; the word scored is the
        adapter's encoding's word for that value.
        """
        enc = self.encoding
        order = list(enc.order)
        nxt = order[order.index(slot) + 1] if order.index(slot) + 1 < len(order) else None
        _, probs = self.fill_slots(contexts, upto=nxt)
        return probs[slot][:, STANDARD.values[slot].index(value)].numpy()

    def read_positions(self, contexts: Sequence[StepContext]) -> list[int]:
        """The first slot is read at the `<r>` token ending the report prompt."""
        return [len(self.prompt_for_report(c)) - 1 for c in contexts]

    def step_starts(self, contexts: Sequence[StepContext]) -> list[int]:
        """Token index where each context's current step begins."""
        return [self.step_start(c) for c in contexts]

    # --- the two hooks ----------------------------------------------------------------------
    def emit_r(self, context: StepContext) -> SelfReport:
        """Fill the slot block from the model's own distribution (see module docstring)."""
        return self.emit_many([context])[0]

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        """Action probabilities with the slot span rendered from `r_override` when given."""
        return self.act_many([context], [r_override])[0]

    def act_without_r(self, context: StepContext) -> dict[str, float]:
        """Action probabilities with no slot span at all (Track 4/5 ablation)."""
        return self.act_without_r_many([context])[0]
