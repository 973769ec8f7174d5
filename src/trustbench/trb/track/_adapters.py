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
  the corpus nor the cache; a readable path holding either is refused at freeze. On a corpus of a
  world with its own slots it is asked in `SlotContext` / `SlotReport` there, the worker finding
  the world itself (`_sandboxed_slot_adapter`; its answers are checked here), and the kit checks
  only its factory and attributes (`check_slot_adapter`).

A local Hugging Face model is `model = "proxy:hf"` with its `save_pretrained` folder in
`settings.folder` (relative to the spec file's folder; `settings.device` and `settings.dtype`
as for `HFCausalLMProxyAdapter.from_path`): on a text-world corpus each trial is `HFTextAgent`
over the model wrapped in `TextWorldAdapter`, with the open-ended hook `continuation_logprob`
(Track 1's `G_llr`); on a trace of a world with its own slots it is `HFSlotAgent` over the
world's text rendering (`settings.slot_fill`: `greedy`, the block filled over each slot's
values, or `generate`, written by the model and parsed strictly), with the same hook. It is
loaded by harness code in the harness process (nothing downloaded, no code from the folder
run); every file of the folder is pinned in the manifest (role
`checkpoint`), the model's identity as a reference checkpoint's is. A corridor trace is not
applicable for it (the Hugging Face corridor adapter is `HFCausalLMProxyAdapter` through
`MODULE:FACTORY`).

A chat model is a candidate of `kind = "openai_chat"` (its `model`, `base_url`, `api_key_env`,
`rate_limit_per_s` and `settings` as for any API candidate): the track wraps it in the chat proxy
adapter (`ChatProxyAdapter`, adapter id `proxy:chat`), whose every request goes through core's
provider (`ctx.chat`), so the declared retries and rate limits apply and each attempt is in the
ledger. The candidate's `entry` must stay empty. On a text-world trace it acts as
`ChatTextAgent`, on a trace of a world with its own slots as `ChatSlotAgent` (over the world's
`render_context` and strictly parsed slot block).
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
import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trustbench import __version__
from trustbench.core import (
    CandidateSpec,
    ExperimentSpec,
    ResolvedItem,
    cache_root,
    declared_variables,
    entry_code_items,
)
from trustbench.errors import CheckFailed, InputError
from trustbench.providers import ChatReply, ChatRequest
from trustbench.sandbox import endpoint_ports
from trustbench.sandbox._rpc import module_paths
from trustbench.trb.adapter._conformance import ConformanceCheck
from trustbench.trb.adapter._protocol import TRB_VERSION
from trustbench.trb.corpus._format import (
    TRANSFER_FAMILY_SPLITS,
    AnyTrace,
    CorpusManifest,
    SlotTrace,
    Trace,
    canonical_sha256,
)
from trustbench.trb.corpus._generate import (
    TRANSFER_FAMILIES,
    generate_reference_corpus,
    split_encodings,
)
from trustbench.trb.corpus._sealed import split_file
from trustbench.trb.corpus._store import read_corpus_of_any_world, write_corpus
from trustbench.trb.instruments._oracles import (
    AlwaysSelfOracle,
    EpiphenomenalOracle,
    GovernedOracle,
    OutcomeOnlyOracle,
    SlotGovernedOracle,
    SlotRIgnoringOracle,
    TextGovernedOracle,
    TextRIgnoringOracle,
    TextUniformOracle,
    UniformOracle,
)
from trustbench.trb.isolation._client import (
    AdapterFailed,
    AdapterWorker,
    adapter_plan,
    refuse_overlap,
)
from trustbench.trb.measures import ReferenceWhiteBox
from trustbench.trb.proxy import (
    HFCausalLMProxyAdapter,
    HFSlotAgent,
    HFTextAgent,
    LocalLMProxyAdapter,
    load_hf_causal_lm,
)
from trustbench.trb.proxy._chat import ChatProxyAdapter, ChatSlotAgent, ChatTextAgent
from trustbench.trb.proxy._hf import SLOT_FILLS
from trustbench.trb.proxy._local import (
    SLOT_ENCODINGS,
    STANDARD,
    SlotEncoding,
    SlotEncodingUnsupported,
    Template,
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
from trustbench.trb.track._pipeline import BUILTIN_CORPUS, TrbTrackOptions
from trustbench.trb.world import (
    CORRIDOR_WORLD_ID,
    CorridorConfig,
    CorridorWorld,
    SlotWorld,
    TextParseError,
    TextTask,
    TextWorld,
    TextWorldAdapter,
    text_world_for_task,
    world_for,
)

# ------------------------------------------------------------------------------------------------
# Where a `trb/profile` run's corpus comes from: a stored folder or the generated built-in.
#
# `corpus.path` names a folder written by `trustbench trb corpus` (or any corpus in that format).
# `corpus.builtin = "reference-world"` generates the reference-world corpus from
# `track_options.corpus_sizes` / `corpus_seed` (one held-out split per transfer family) and
# stores it once under
# `$TRUSTBENCH_CACHE/trb/corpora/<key>` (generation is deterministic, so a deleted cache is
# rebuilt byte for byte). Either way the run reads the stored files, and the manifest pins their
# SHA-256: core refuses to run or report if one changes after freeze.


@dataclass(frozen=True)
class LoadedCorpus:
    """A verified corpus folder and its traces."""

    folder: Path
    """The folder read."""
    manifest: CorpusManifest
    """Its manifest (split hashes, provenance, corpus SHA-256)."""
    splits: dict[str, list[AnyTrace]]
    """Traces per split (`SlotTrace` in a world with its own slots)."""

    def encoding(self, split: str) -> SlotEncoding:
        """The slot encoding proxy adapters are asked in on a split (its manifest entry)."""
        info = self.manifest.splits.get(split)
        return SLOT_ENCODINGS[info.report_encoding] if info is not None else STANDARD

    def traces(self, split: str) -> list[Trace]:
        """A split's corridor or text-world traces, what the trained adapters and Track 2 fit on.

        Empty in a world with its own slots (its `SlotTrace` lines), and for a missing split.
        """
        return [t for t in self.splits.get(split, []) if isinstance(t, Trace)]

    def held_out(self, options: TrbTrackOptions) -> dict[str, AnyTrace]:
        """The traces that are cases: each requested held-out split, capped by `max_traces`."""
        cases: dict[str, AnyTrace] = {}
        for split in options.splits:
            traces = sorted(self.splits.get(split, []), key=lambda t: t.trace_id)
            for trace in traces[: options.max_traces]:
                if trace.trace_id in cases:
                    raise InputError(
                        f"trace id {trace.trace_id} appears in two splits",
                        location=str(self.folder),
                    )
                cases[trace.trace_id] = trace
        return cases


def _builtin_folder(options: TrbTrackOptions) -> Path:
    key = canonical_sha256(
        {
            "trb": TRB_VERSION,
            "trustbench": __version__,
            "sizes": dict(sorted(options.corpus_sizes.items())),
            "seed": options.corpus_seed,
            # one split per transfer family (since issue 16): its world and report encoding,
            # so a changed or added family never reuses a stored corpus
            "transfer": {
                "families": {k: v.model_dump(mode="json") for k, v in TRANSFER_FAMILIES.items()},
                "encodings": split_encodings(TRANSFER_FAMILY_SPLITS),
            },
        }
    )[:16]
    return cache_dir().parent / "corpora" / f"{BUILTIN_CORPUS}-{key}"


def corpus_folder(spec: ExperimentSpec, options: TrbTrackOptions, base_dir: Path) -> Path:
    """The corpus folder of a spec, generating the built-in corpus on first use.

    Raises:
        InputError: an unknown built-in label or a missing folder.
    """
    if spec.corpus.path is not None:
        folder = (base_dir / spec.corpus.path).resolve()
        if not (folder / "manifest.json").is_file():
            raise InputError(
                "not a TRB corpus folder (no manifest.json); write one with `trustbench trb "
                "corpus`",
                location=str(folder),
            )
        return folder
    if spec.corpus.builtin != BUILTIN_CORPUS:
        raise InputError(
            f"unknown built-in TRB corpus {spec.corpus.builtin!r} (known: {BUILTIN_CORPUS})",
            location="corpus/builtin",
        )
    folder = _builtin_folder(options)
    if not (folder / "manifest.json").is_file():
        sizes = {"train": 0, "dev": 0, "eval": 0, "transfer": 0, **options.corpus_sizes}
        splits = generate_reference_corpus(sizes, seed=options.corpus_seed, transfer_families=True)
        staging = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
        write_corpus(staging, {k: v for k, v in splits.items() if v})
        try:
            staging.rename(folder)
        except OSError:  # another process stored the same corpus first: keep theirs
            shutil.rmtree(staging, ignore_errors=True)
    return folder


_LOADED: dict[tuple[Path, str], LoadedCorpus] = {}


def load_corpus(folder: Path) -> LoadedCorpus:
    """Read and verify a corpus folder (memoised by folder and manifest bytes)."""
    digest = hashlib.sha256((folder / "manifest.json").read_bytes()).hexdigest()
    key = (folder, digest)
    if key not in _LOADED:
        manifest, splits = read_corpus_of_any_world(folder)
        _LOADED.clear()
        _LOADED[key] = LoadedCorpus(folder, manifest, splits)
    return _LOADED[key]


def corpus_items(corpus: LoadedCorpus) -> list[ResolvedItem]:
    """The corpus files to hash into the experiment manifest."""
    items = [ResolvedItem("corpus", "manifest.json", path=corpus.folder / "manifest.json")]
    for info in corpus.manifest.splits.values():
        file = split_file(info)  # a sealed split's envelope: its clear bytes are never on disk
        items.append(ResolvedItem("corpus", file, path=corpus.folder / file))
    return items


# ------------------------------------------------------------------------------------------------
# A submitted `MODULE:FACTORY` adapter: located without importing it, checked in its worker.
#
# Its code is untrusted, so it never runs in the harness process (see `trb.isolation`): the
# conformance kit runs inside the sandboxed worker, and its code (the factory's file and its whole
# package) is hashed for the manifest without being imported. A frozen run's inputs are re-checked
# (`verify`, `report`, and `run` before its first trial) from those files alone: no worker starts
# until they match the manifest.


def user_adapter(
    candidate: CandidateSpec, target: str, corpus: LoadedCorpus, options: TrbTrackOptions
) -> tuple[AdapterWorker, list[ResolvedItem]]:
    """A `MODULE:FACTORY` candidate's sandboxed worker (after the conformance kit) and files.

    Raises:
        InputError: a malformed target, or a readable path holding the corpus or the cache.
        CheckFailed: the worker cannot start, or the adapter fails the conformance kit.
    """
    if ":" not in target.strip(":") or target.count(":") != 1:
        raise InputError(f"expected MODULE:FACTORY, got {target!r}", location=candidate.name)
    try:
        ports = endpoint_ports(candidate.endpoints)
    except ValueError as error:
        raise InputError(str(error), location=f"candidate {candidate.name} endpoints") from None
    plan = adapter_plan(
        target, options.adapter_read_paths,
        hidden=[str(corpus.folder), str(cache_dir()), str(cache_root())], ports=ports,
        variables=declared_variables(candidate),
    )  # fmt: skip
    # The import roots are readable less the hidden paths; every other readable path must
    # neither hold nor lie inside the corpus or the cache.
    refuse_overlap(
        [p for p in plan.read if p not in plan.roots
         and not p.startswith(("/usr", "/lib", "/bin", "/etc", "/dev"))],
        {"corpus": corpus.folder, "TRB cache": cache_dir()},
    )  # fmt: skip
    worker = AdapterWorker(target, plan, fallback=candidate.isolation == "none")
    in_slot_world = isinstance(world_for(corpus.manifest.world_id), SlotWorld)
    try:
        results = [ConformanceCheck.model_validate(r) for r in
                   worker.conformance(options.conformance_traces, in_slot_world)]  # fmt: skip
    except Exception as error:
        worker.close()
        raise CheckFailed(
            f"adapter {target} could not be started in its sandboxed worker: {error}",
            location=f"candidate {candidate.name}",
        ) from None
    failed = [r for r in results if not r.passed]
    if failed:
        first = failed[0]
        worker.close()
        raise CheckFailed(
            f"adapter {target} fails the conformance kit ({len(failed)} check(s)); first: "
            f"{first.hook} / {first.check}: {first.detail}",
            location=f"candidate {candidate.name}",
        )
    return worker, adapter_code_items(candidate, target)


def adapter_code_items(candidate: CandidateSpec, target: str) -> list[ResolvedItem]:
    """The adapter's code the manifest pins, found without importing any of it.

    Core's `entry_code_items`, as for an in-process candidate: the factory's file and its whole
    top-level package (or, for a lone module, the sibling modules it imports), so a helper the
    adapter imports cannot change after the run unseen. `find_spec` on a dotted name would
    import the parent packages in the harness process; core's search never does.

    Raises:
        InputError: the adapter's module cannot be found.
    """
    module_paths(target)  # the working folder importable, as for the worker; a missing module named
    return entry_code_items(target, f"candidate {candidate.name}")


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

TEXT_ORACLES: dict[str, Callable[[], Any]] = {
    cls.name: cls for cls in (TextGovernedOracle, TextRIgnoringOracle, TextUniformOracle)
}
"""The text world's oracles by id: text agents, measured through `TextWorldAdapter` on the
traces of a text-world corpus (exact G near 1, and two floors)."""

SLOT_ORACLES: dict[str, Callable[[SlotWorld], Any]] = {
    cls.name: cls for cls in (SlotGovernedOracle, SlotRIgnoringOracle)
}
"""The world-generic oracles by id: they act in any world with its own slots (`SlotWorld`) by
the world's rule, governed by r or ignoring it (G near 1, and the floor)."""

PROXY_BASELINES: dict[str, tuple[Recipe, Template]] = {
    "proxy:instruct": ("instruct", "direct"),
    "proxy:cot-prompted": ("instruct", "reasoning-first"),
    "proxy:cot-supervised-finetune": ("cot-sft", "reasoning-first"),
}
"""Proxy baseline ids -> (token-world LM recipe, prompt template)."""

BUILTIN_ADAPTERS: tuple[str, ...] = (
    *sorted(REFERENCE_MODELS), *sorted(PROXY_BASELINES), *sorted(ORACLES), *sorted(TEXT_ORACLES),
    *sorted(SLOT_ORACLES),
)  # fmt: skip
"""Every built-in adapter id."""


CHAT_PROXY = "proxy:chat"
"""Adapter id of an `openai_chat` candidate: the chat proxy adapter over core's provider."""

HF_PROXY = "proxy:hf"
"""Adapter id of a local Hugging Face model named by `settings.folder` (a text agent)."""

HF_SETTINGS = frozenset({"folder", "device", "dtype", "slot_fill"})
"""The `settings` keys a `proxy:hf` candidate's model is loaded from (`hf_model_folder`)."""

DECLARED_SETTINGS = frozenset({"baseline", "parameter_count", "architecture"})
"""`settings` keys the report reads of any TRB candidate: the spec §4 baseline it fills
(`_profile.baseline_of`) and, for a gap pair, its declared size (`_analysis.gap_pair_check`)."""


SEED_MARK = "@seed="
"""Separates a reference model id from a replica's training seed (`trace-ai-full@seed=3`);
the one definition (`trb.track._analysis` reads replicas' adapter ids with it)."""


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
    if model == HF_PROXY and not isinstance(candidate.settings.get("folder"), str):
        raise InputError(
            f'{HF_PROXY} needs settings.folder = "PATH" (a local save_pretrained folder)',
            location=f"{where} settings.folder",
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
    hf: HFModelFolder | None = None
    """For `proxy:hf`: the local model folder, loaded once and shared by every trial's agent."""

    def build(
        self,
        world: CorridorConfig,
        transport: Callable[[ChatRequest], ChatReply] | None = None,
        encoding: SlotEncoding = STANDARD,
        *,
        task: TextTask | None = None,
    ) -> Any:
        """A new adapter for a trace of `world`, asked in the trace's slot `encoding`.

        Args:
            world: The trace's world.
            transport: For `proxy:chat`: sends one request through core's provider.
            encoding: The report encoding of the trace's split (`with_encoding`).
            task: The text task a text-world trace states (None: a corridor trace).

        Raises:
            NotApplicable: a reference model asked about a world of another size, or an
                encoding the adapter has no use for or cannot be asked in.
        """
        if task is not None:
            try:
                text_world = text_world_for_task(task, world)
            except TextParseError as error:
                raise NotApplicable(f"{self.adapter}: {error}") from None
            return self._text_adapter(text_world, transport)
        if self.adapter in TEXT_ORACLES or self.hf is not None:
            raise NotApplicable(_world_mismatch(self.adapter, None))
        built = self._build(world, transport)
        try:
            return with_encoding(built, encoding, self.adapter)
        except NotApplicable:
            close = getattr(built, "close", None)
            if callable(close):  # e.g. a chat proxy's event loop
                close()
            raise

    def build_for(
        self,
        trace: AnyTrace,
        transport: Callable[[ChatRequest], ChatReply] | None = None,
        encoding: SlotEncoding = STANDARD,
    ) -> Any:
        """A new adapter for `trace`: `build` for its world, or a slot world's adapter.

        Raises:
            NotApplicable: as `build`, or an adapter that cannot act in the trace's world.
        """
        if isinstance(trace, SlotTrace):
            return self._slot_adapter(trace, transport)
        return self.build(trace.world, transport, encoding, task=trace.task)

    def _slot_adapter(
        self, trace: SlotTrace, transport: Callable[[ChatRequest], ChatReply] | None
    ) -> Any:
        """The adapter of a trace in a world with its own slots: an oracle, chat, or a factory.

        A slot oracle, the chat proxy (`ChatSlotAgent`, over the world's text rendering), a
        local Hugging Face model (`HFSlotAgent`, over the same rendering), a trusted in-process
        factory (tests, library use) or a submitted `MODULE:FACTORY` in its sandboxed worker
        (`_sandboxed_slot_adapter`) is asked in `SlotContext` and `SlotReport`; every other
        adapter speaks the corridor's `SelfReport` or a text world.

        Raises:
            NotApplicable: an adapter that speaks the corridor or a text world only, or a
                worker that cannot act in the world.
        """
        world = world_for(trace.world_id)
        assert isinstance(world, SlotWorld), "a SlotTrace is read only in a SlotWorld corpus"
        if self.adapter in SLOT_ORACLES:
            return SLOT_ORACLES[self.adapter](world)
        if self.chat is not None:
            return ChatSlotAgent(self._chat_adapter(transport), world)
        if self.hf is not None:
            return self.hf.slot_agent(world)
        if self.factory is not None and self.worker is None:
            return self.factory()
        if self.worker is not None:
            return self._sandboxed_slot_adapter(world)
        raise NotApplicable(
            f"{self.adapter} speaks the corridor's SelfReport or a text world; this trace is in "
            f"world {trace.world_id}, which declares its own slots "
            f"({', '.join(world.declaration.slots)})"
        )

    def _sandboxed_slot_adapter(self, world: SlotWorld) -> Any:
        """A fresh adapter in the candidate's worker, acting in `world` (found there itself).

        Raises:
            NotApplicable: the worker cannot find the world (registered only in the harness
                process, or declared otherwise there) or the factory fails: the reason, so the
                trial says "not run" with it.
        """
        assert self.worker is not None
        try:
            return self.worker.adapter(world)
        except AdapterFailed as error:
            raise NotApplicable(
                f"{self.adapter} cannot act in world {world.declaration.world_id} in its "
                f"sandboxed worker: {error}"
            ) from None

    def _text_adapter(
        self, world: TextWorld, transport: Callable[[ChatRequest], ChatReply] | None
    ) -> TextWorldAdapter:
        """The adapter of a text-world trace: a text oracle, or the chat proxy as a text agent.

        Raises:
            NotApplicable: an adapter that speaks the corridor only.
        """
        if self.adapter in TEXT_ORACLES:
            return TextWorldAdapter(TEXT_ORACLES[self.adapter](), world)
        if self.hf is not None:
            return TextWorldAdapter(self.hf.agent(), world)
        if self.chat is None:
            raise NotApplicable(_world_mismatch(self.adapter, world))
        chat = self._build(world.dynamics, transport)
        return TextWorldAdapter(ChatTextAgent(chat), world)

    def _build(
        self, world: CorridorConfig, transport: Callable[[ChatRequest], ChatReply] | None
    ) -> Any:
        if self.chat is not None:
            return self._chat_adapter(transport, world.length)
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

    def _chat_adapter(
        self, transport: Callable[[ChatRequest], ChatReply] | None, length: int = 7
    ) -> ChatProxyAdapter:
        """The chat proxy over the trial's transport (`length`: the corridor's, when it is one).

        Raises:
            InputError: no transport (every call goes through core's provider).
        """
        assert self.chat is not None
        if transport is None:
            raise InputError(f"{self.adapter} needs the trial's chat transport")
        return ChatProxyAdapter(
            "http://transport.invalid/v1",  # never contacted: every call goes to transport
            length=length,
            transport=transport,
            **self.chat,
        )


def _world_mismatch(adapter: str, world: TextWorld | None) -> str:
    """Why an adapter cannot act on a trace of another world than the one it speaks.

    `world`: the trace's text world (any registered one, built in or a plug-in's), or None for
    a corridor trace.
    """
    if world is None:
        return (
            f"{adapter} speaks a text world; this trace is a corridor trace "
            f"(world {CORRIDOR_WORLD_ID} does not declare a text rendering)"
        )
    return (
        f"{adapter} speaks the corridor; this trace is in world "
        f"{world.declaration.world_id} (it does not declare the corridor's observations)"
    )


_HF_LOADED: dict[tuple[str, str, str], tuple[Any, Any]] = {}
"""Hugging Face models loaded in this process, by (folder, device, dtype): a run builds one
agent per trial over the same weights."""


@dataclass(frozen=True)
class HFModelFolder:
    """A `proxy:hf` candidate's model: a local `save_pretrained` folder, device and dtype."""

    folder: Path
    """The resolved folder."""
    device: str = "cpu"
    """`cpu`, `cuda` or `cuda:N` (`resolve_device_dtype`)."""
    dtype: str = "float32"
    """Weight dtype name."""
    slot_fill: str = "greedy"
    """In a world with its own slots: how the slot block is got (`HFSlotAgent`'s `slot_fill`)."""

    def load(self) -> tuple[Any, Any]:
        """The model and tokenizer, loaded once per process (`load_hf_causal_lm`).

        Raises:
            InputError: the folder is not a loadable causal LM, or device/dtype is refused.
        """
        key = (str(self.folder), self.device, self.dtype)
        if key not in _HF_LOADED:
            _HF_LOADED[key] = load_hf_causal_lm(self.folder, device=self.device, dtype=self.dtype)
        return _HF_LOADED[key]

    def agent(self) -> HFTextAgent:
        """A fresh text agent over the shared weights (no memo carried between trials)."""
        return HFTextAgent(self._scorer())

    def slot_agent(self, world: SlotWorld) -> HFSlotAgent:
        """A fresh agent of a world with its own slots over the shared weights."""
        return HFSlotAgent(self._scorer(), world, self.slot_fill)

    def _scorer(self) -> HFCausalLMProxyAdapter:
        model, tokenizer = self.load()
        return HFCausalLMProxyAdapter(model, tokenizer, self.folder.name, location=str(self.folder))

    def items(self, candidate: str) -> list[ResolvedItem]:
        """Every file of the folder, pinned in the manifest as the candidate's checkpoint.

        Raises:
            InputError: the folder is missing or holds no file.
        """
        files = (
            sorted(p for p in self.folder.rglob("*") if p.is_file()) if self.folder.is_dir() else []
        )
        if not files:
            raise InputError("no such model folder, or it holds no file", location=str(self.folder))
        return [
            ResolvedItem(
                "checkpoint", f"{candidate}: {p.relative_to(self.folder).as_posix()}", path=p
            )
            for p in files
        ]


def hf_model_folder(candidate: CandidateSpec, base_dir: Path) -> HFModelFolder:
    """A `proxy:hf` candidate's folder (relative to the spec's folder), device, dtype, slot fill.

    Raises:
        InputError: `settings.device` or `settings.dtype` is not a string, or
            `settings.slot_fill` is not one of `SLOT_FILLS`.
    """
    settings = candidate.settings
    device, dtype = settings.get("device", "cpu"), settings.get("dtype", "float32")
    if not isinstance(device, str) or not isinstance(dtype, str):
        raise InputError(
            'settings.device and settings.dtype must be strings (e.g. "cpu", "float32")',
            location=f"candidate {candidate.name} settings",
        )
    slot_fill = settings.get("slot_fill", "greedy")
    if slot_fill not in SLOT_FILLS:
        raise InputError(
            f"settings.slot_fill must be one of {', '.join(SLOT_FILLS)}, got {slot_fill!r}",
            location=f"candidate {candidate.name} settings.slot_fill",
        )
    folder = (base_dir / Path(str(settings["folder"])).expanduser()).resolve()
    return HFModelFolder(folder, device, dtype, str(slot_fill))


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
    train = corpus.traces("train")
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
    train = corpus.traces("train")[: options.lm_train_traces]
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
    base_dir: Path | None = None,
) -> tuple[dict[str, AdapterSource], list[ResolvedItem]]:
    """Build every candidate's adapter source; return them with the files to hash.

    Reference models are trained or loaded here, so the manifest pins their checkpoints. With
    `start_workers` False (a frozen run's re-check), a submitted adapter is neither started nor
    checked: only its code is listed for hashing, and it has no source in the result; a
    `proxy:hf` model is not loaded then, only its folder's files listed. `base_dir` is the
    spec file's folder, which a `proxy:hf` candidate's `settings.folder` is relative to (the
    working folder when None).
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
        elif target in ORACLES or target in TEXT_ORACLES or target in SLOT_ORACLES:
            sources[candidate.name] = AdapterSource(target)
        elif target == HF_PROXY:
            hf = hf_model_folder(candidate, base_dir or Path.cwd())
            items += hf.items(candidate.name)
            # The declared thread count, as for the reference models: torch's default (every
            # core) made each forward pass 7x slower on 2 shared, busy cores (measured here).
            torch.set_num_threads(options.train.threads)
            if start_workers:
                hf.load()  # a folder that does not load is refused at freeze, naming it
            sources[candidate.name] = AdapterSource(target, hf=hf)
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
