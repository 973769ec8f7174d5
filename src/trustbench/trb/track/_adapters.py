"""Candidates of a `trb/profile` run: adapters named by a built-in id or `MODULE:FACTORY`.

A candidate is `kind = "inprocess"` with `model` naming its adapter:

- `trace-ai-ablation`, `trace-ai-full`: the reference native models (spec baselines 4 and 5),
  trained on the corpus's train split on first use and loaded from the checkpoint cache after;
  resolve pins each checkpoint's SHA-256 in the manifest;
- `trace-ai-full@seed=K`, `trace-ai-ablation@seed=K`: the same model trained with training seed
  K (a seed replica). Replicas are measured on Track 1 only (the other tracks are recorded as
  not applicable for them): they exist so Delta_gov gets a seed-and-trace interval;
- `oracle:perfectly-governed`, `oracle:epiphenomenal`, `oracle:uniform`, `oracle:always-self`,
  `oracle:outcome-only-attribution`: the audit oracles, whose figures have closed forms;
- `proxy:instruct`, `proxy:cot-prompted`, `proxy:cot-supervised-finetune`: spec baselines 1-3,
  small causal LMs trained on the token rendering of the corpus's train split (cached; resolve
  pins each `model.pt`) and run through the proxy tier (`LocalLMProxyAdapter`); instruct and
  CoT-prompted share weights and differ in template;
- `MODULE:FACTORY`: a user adapter factory (zero arguments); it must pass the conformance kit
  (`trustbench trb check-adapter`) at freeze, and its source file is hashed into the manifest.
  It is untrusted code, so it never runs in the harness process: its module is located without
  being imported, and the conformance kit and every trial run in a sandboxed worker process
  (`trb.isolation`: its own empty folder, Landlock or the named fallback) that can read neither
  the corpus nor the cache; a readable path holding either is refused at freeze.

A chat model is a candidate of `kind = "openai_chat"` (its `model`, `base_url`, `api_key_env`,
`rate_limit_per_s` and `settings` as for any API candidate): the track wraps it in the chat proxy
adapter (`ChatProxyAdapter`, adapter id `proxy:chat`), whose every request goes through core's
provider (`ctx.chat`), so the declared retries and rate limits apply and each attempt is in the
ledger. The candidate's `entry` must stay empty.
The track drives the adapter itself and records its calls as attempts.

Report encoding (Track 6's `transfer_encoding` context): the track builds each trial's adapter
with its split's slot encoding (`LoadedCorpus.encoding`). A proxy adapter is switched to it
with `use_encoding(encoding)` (the built-in chat and LM proxies have it; a user proxy adapter
may define it). The encoding is text, so for a native adapter (hooks exchange `SelfReport`
objects), a proxy adapter without `use_encoding`, or a word-level LM whose vocabulary lacks the
encoding's words, the trial is "not applicable" with that reason, never scored.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trustbench.core import CandidateSpec, ResolvedItem
from trustbench.errors import InputError
from trustbench.providers import ChatReply, ChatRequest
from trustbench.trb.instruments._oracles import (
    AlwaysSelfOracle,
    EpiphenomenalOracle,
    GovernedOracle,
    OutcomeOnlyOracle,
    UniformOracle,
)
from trustbench.trb.isolation._client import AdapterWorker
from trustbench.trb.measures import ReferenceWhiteBox
from trustbench.trb.proxy import LocalLMProxyAdapter
from trustbench.trb.proxy._chat import ChatProxyAdapter
from trustbench.trb.proxy._local import Template
from trustbench.trb.proxy._slots import (
    STANDARD,
    SlotEncoding,
    SlotEncodingUnsupported,
    ask_in_encoding,
)
from trustbench.trb.reference import (
    REFERENCE_MODELS,
    NativeModelAdapter,
    ReferenceNativeModel,
    cache_dir,
    load_reference_model,
)
from trustbench.trb.reference._token_world import Recipe, load_token_lm, render_history
from trustbench.trb.track._corpus_source import LoadedCorpus
from trustbench.trb.track._options import TrbTrackOptions
from trustbench.trb.track._user_adapter import adapter_code_items, user_adapter
from trustbench.trb.world import CorridorConfig, CorridorWorld

ORACLES: dict[str, Callable[[CorridorWorld], Any]] = {
    cls.name: cls
    for cls in (
        GovernedOracle,
        EpiphenomenalOracle,
        UniformOracle,
        AlwaysSelfOracle,
        OutcomeOnlyOracle,
    )
}
"""Oracle adapters by id (their `name`)."""

PROXY_BASELINES: dict[str, tuple[Recipe, Template]] = {
    "proxy:instruct": ("instruct", "direct"),
    "proxy:cot-prompted": ("instruct", "reasoning-first"),
    "proxy:cot-supervised-finetune": ("cot-sft", "reasoning-first"),
}
"""Proxy baseline ids -> (token-world LM recipe, prompt template)."""

BUILTIN_ADAPTERS: tuple[str, ...] = (
    *sorted(REFERENCE_MODELS), *sorted(PROXY_BASELINES), *sorted(ORACLES),
)  # fmt: skip
"""Every built-in adapter id."""


CHAT_PROXY = "proxy:chat"
"""Adapter id of an `openai_chat` candidate: the chat proxy adapter over core's provider."""


SEED_MARK = "@seed="
"""Separates a reference model id from a replica's training seed (`trace-ai-full@seed=3`);
the one definition (`trb.track._comparisons` reads replicas' adapter ids with it)."""


def reference_seed(model: str) -> tuple[str, int | None] | None:
    """(reference model id, replica training seed or None) when `model` names one, else None."""
    base, mark, seed = model.partition(SEED_MARK)
    if base not in REFERENCE_MODELS:
        return None
    if not mark:
        return base, None
    return (base, int(seed)) if seed.isdigit() else None


class NotApplicable(Exception):
    """The adapter cannot be run on this trace (e.g. a world its encoder was not built for)."""


def with_encoding(adapter: Any, encoding: SlotEncoding, name: str) -> Any:
    """The adapter switched to a context's slot encoding (`proxy._slots.ask_in_encoding`).

    Raises:
        NotApplicable: the encoding has no meaning for the adapter or cannot be asked in it.
    """
    try:
        return ask_in_encoding(adapter, encoding, name)
    except SlotEncodingUnsupported as why:
        raise NotApplicable(str(why)) from None


def adapter_id(candidate: CandidateSpec) -> str:
    """The adapter id of a candidate, checking the candidate is a TRB adapter.

    Raises:
        InputError: naming the candidate when it is not an in-process adapter candidate.
    """
    where = f"candidate {candidate.name}"
    if candidate.kind == "openai_chat":
        return CHAT_PROXY
    if candidate.kind != "inprocess":
        raise InputError(
            'TRB candidates are adapters: use kind = "inprocess" with model = an adapter id, '
            'or kind = "openai_chat" for a chat model through the proxy adapter',
            location=where,
        )
    if candidate.entry is not None:
        raise InputError(
            "name the adapter in `model` (a built-in id or MODULE:FACTORY), not in `entry`",
            location=where,
        )
    if not candidate.model:
        raise InputError(
            f"model must name an adapter: one of {', '.join(BUILTIN_ADAPTERS)} or MODULE:FACTORY",
            location=where,
        )
    model = candidate.model
    if SEED_MARK in model and reference_seed(model) is None:
        raise InputError(
            f"a seed replica is {' or '.join(f'{m}{SEED_MARK}K' for m in sorted(REFERENCE_MODELS))}"
            f" with K a non-negative integer; got {model!r}",
            location=where,
        )
    if model not in BUILTIN_ADAPTERS and ":" not in model and reference_seed(model) is None:
        raise InputError(
            f"unknown adapter {model!r}: use one of {', '.join(BUILTIN_ADAPTERS)} or "
            "MODULE:FACTORY",
            location=where,
        )
    return model


@dataclass
class AdapterSource:
    """Builds a fresh adapter of one candidate per trial (no state carried between trials)."""

    adapter: str
    """The adapter id."""
    model: ReferenceNativeModel | None = None
    """The loaded reference model, for reference adapters."""
    trained_world: CorridorConfig | None = None
    """World of the train split the reference model's encoder was built for."""
    factory: Callable[[], Any] | None = None
    """A trusted in-process factory (tests); user `MODULE:FACTORY` adapters use `worker`."""
    worker: AdapterWorker | None = None
    """The sandboxed worker a `MODULE:FACTORY` adapter runs in (one per candidate)."""
    card: dict[str, Any] | None = None
    """The reference model's card (checkpoint SHA-256, training summary)."""
    prototype: Any = None
    """A built adapter copied per trial (white-box reference adapter or proxy LM adapter)."""
    max_len: int | None = None
    """Longest token sequence of a proxy LM (longer episodes are not applicable)."""
    chat: dict[str, Any] | None = None
    """For `proxy:chat`: the adapter's arguments (model, estimation options)."""

    seed_replica: int | None = None
    """Training seed of a reference seed replica (`...@seed=K`); measured on Track 1 only."""

    def build(
        self,
        world: CorridorConfig,
        transport: Callable[[ChatRequest], ChatReply] | None = None,
        encoding: SlotEncoding = STANDARD,
    ) -> Any:
        """A new adapter for a trace of `world`, asked in the trace's slot `encoding`.

        Args:
            world: The trace's world.
            transport: For `proxy:chat`: sends one request through core's provider.
            encoding: The report encoding of the trace's split (`with_encoding`).

        Raises:
            NotApplicable: a reference model asked about a world of another size, or an
                encoding the adapter has no use for or cannot be asked in.
        """
        built = self._build(world, transport)
        try:
            return with_encoding(built, encoding, self.adapter)
        except NotApplicable:
            close = getattr(built, "close", None)
            if callable(close):  # e.g. a chat proxy's event loop
                close()
            raise

    def _build(
        self, world: CorridorConfig, transport: Callable[[ChatRequest], ChatReply] | None
    ) -> Any:
        if self.chat is not None:
            if transport is None:
                raise InputError(f"{self.adapter} needs the trial's chat transport")
            return ChatProxyAdapter(
                "http://transport.invalid/v1",  # never contacted: every call goes to transport
                length=world.length,
                transport=transport,
                **self.chat,
            )
        if self.model is not None:
            trained = self.trained_world
            assert trained is not None
            if (world.length, world.horizon) != (trained.length, trained.horizon):
                raise NotApplicable(
                    f"{self.adapter} encodes corridors of length {trained.length} and horizon "
                    f"{trained.horizon}; this trace's world has {world.length}/{world.horizon}"
                )
            if self.prototype is None:
                return NativeModelAdapter(self.model, self.adapter, trained.length, trained.horizon)
            # A shallow copy shares the weights, the fitted ablation mean and the memo of
            # deterministic forward passes; nothing a trial does changes them.
            return copy.copy(self.prototype)
        if self.max_len is not None:
            # <bos>, 5 words per step (a delayed cue's lead-in included), slot block, <act>
            need = 1 + 5 * (world.cue_step + world.horizon) + 8
            if need > self.max_len:
                raise NotApplicable(
                    f"{self.adapter}: episodes of {need} tokens exceed its max_len {self.max_len}"
                )
            return copy.copy(self.prototype)
        if self.adapter in ORACLES:
            return ORACLES[self.adapter](CorridorWorld(world))
        if self.worker is not None:
            return self.worker.adapter()
        assert self.factory is not None
        return self.factory()


_MODELS: dict[tuple[str, str, str, str], tuple[ReferenceNativeModel, dict[str, Any]]] = {}
"""Loaded reference models of this process. `load_reference_model` re-hashes every train trace
(canonical JSON) on each call, seconds per model; freeze and run resolve twice in one process."""


def _reference(
    name: str, corpus: LoadedCorpus, options: TrbTrackOptions
) -> tuple[AdapterSource, list[ResolvedItem]]:
    base, replica = reference_seed(name) or (name, None)
    train_config = (
        options.train if replica is None else options.train.model_copy(update={"seed": replica})
    )
    train = corpus.splits.get("train") or []
    if not train:
        raise InputError(
            f"adapter {name} is trained on the corpus's train split, which is empty",
            location=str(corpus.folder),
        )
    # Inference uses the declared thread count as training does: these models are tiny, and
    # torch's default (every core) makes each small op contend for a shared machine (measured
    # here: 10x slower GRU calls on 2 busy cores). Training sets it too, so this only matters
    # when the checkpoint comes from the cache.
    torch.set_num_threads(options.train.threads)
    key = (base, corpus.manifest.corpus_sha256, train_config.model_dump_json(), str(cache_dir()))
    if key not in _MODELS:
        _MODELS[key] = load_reference_model(base, train, corpus.manifest, train_config)
    model, card = _MODELS[key]
    weights = cache_dir() / str(card["checkpoint"])
    world = train[0].world
    fit = [t.context(s.t) for t in train[: options.grounding_fit_traces] for s in t.steps]
    prototype = ReferenceWhiteBox(model, name, world.length, world.horizon, fit)
    source = AdapterSource(
        name, model=model, trained_world=world, card=card, prototype=prototype,
        seed_replica=replica,
    )  # fmt: skip
    return source, [ResolvedItem("checkpoint", name, path=weights)]


_PROXIES: dict[tuple[str, ...], tuple[LocalLMProxyAdapter, Path, dict[str, Any]]] = {}
"""Loaded proxy LMs of this process, by (id, corpus, config, cache); two ids share weights."""


def _proxy(
    name: str, corpus: LoadedCorpus, options: TrbTrackOptions
) -> tuple[AdapterSource, list[ResolvedItem]]:
    recipe, template = PROXY_BASELINES[name]
    train = (corpus.splits.get("train") or [])[: options.lm_train_traces]
    if not train:
        raise InputError(
            f"adapter {name} is trained on the corpus's train split, which is empty",
            location=str(corpus.folder),
        )
    # `load_token_lm` re-hashes every train trace for its cache key (seconds per call, and a
    # freeze/run/report resolves three times); the corpus SHA-256 already pins those traces.
    key = (
        recipe, corpus.manifest.corpus_sha256, str(len(train)),
        options.token_lm.model_dump_json(), str(cache_dir()),
    )  # fmt: skip
    if key not in _PROXIES:
        folder, card = load_token_lm(recipe, train, corpus.manifest, options.token_lm)
        adapter = LocalLMProxyAdapter.from_folder(folder, recipe, render_history, "direct")
        _PROXIES[key] = (adapter, folder, card)
    loaded, folder, card = _PROXIES[key]
    # Same weights, this baseline's template; the memo of template-independent results
    # (reports, overridden actions) is shared by the two templates over one set of weights.
    prototype = LocalLMProxyAdapter(
        loaded.model, loaded.tokenizer, name.removeprefix("proxy:"), render_history, template,
        memo=loaded.memo,
    )  # fmt: skip
    source = AdapterSource(name, card=card, prototype=prototype, max_len=options.token_lm.max_len)
    return source, [ResolvedItem("checkpoint", f"{name} ({recipe})", path=folder / "model.pt")]


def resolve_adapters(
    candidates: list[CandidateSpec],
    corpus: LoadedCorpus,
    options: TrbTrackOptions,
    start_workers: bool = True,
) -> tuple[dict[str, AdapterSource], list[ResolvedItem]]:
    """Build every candidate's adapter source; return them with the files to hash.

    Reference models are trained or loaded here, so the manifest pins their checkpoints. With
    `start_workers` False (a frozen run's re-check), a submitted adapter is neither started nor
    checked: only its code is listed for hashing, and it has no source in the result.
    """
    sources: dict[str, AdapterSource] = {}
    items: list[ResolvedItem] = []
    reference_items: dict[str, list[ResolvedItem]] = {}
    for candidate in candidates:
        target = adapter_id(candidate)
        if reference_seed(target) is not None:
            if target not in reference_items:
                sources[candidate.name], reference_items[target] = _reference(
                    target, corpus, options
                )
                items += reference_items[target]
            else:
                sources[candidate.name] = next(s for s in sources.values() if s.adapter == target)
        elif target in PROXY_BASELINES:
            sources[candidate.name], extra = _proxy(target, corpus, options)
            items += [item for item in extra if item.name not in {i.name for i in items}]
        elif target in ORACLES:
            sources[candidate.name] = AdapterSource(target)
        elif target == CHAT_PROXY:
            chat = {"model": candidate.model, "name": candidate.name,
                    "samples": options.chat_samples,
                    "estimator": options.chat_estimator}  # fmt: skip
            sources[candidate.name] = AdapterSource(target, chat=chat)
        else:
            if start_workers:
                worker, extra = user_adapter(candidate, target, corpus, options)
                sources[candidate.name] = AdapterSource(target, worker=worker)
            else:
                extra = adapter_code_items(candidate, target)
            known = {(i.role, i.name) for i in items}
            items += [item for item in extra if (item.role, item.name) not in known]
    return sources, items
