"""`trb/profile`: TRB through the shared harness (freeze, ledger, run, report).

- cases: the held-out traces (eval, and transfer under its own split label);
- candidates: adapters (`inprocess`, `model` = a built-in adapter id or `MODULE:FACTORY`);
- trials: trace x adapter x K (`trials_per_case`; adapters are deterministic under a seed, so
  K = 1 is the default and K > 1 repeats with seeds `adapter_seed + trial_index`);
- `resolve` hashes the corpus files and, training or loading them, the reference checkpoints,
  and runs the conformance kit on user adapters;
- `run_trial` builds a fresh adapter, runs every registered measure (Tracks 1-5; Track 6 is
  derived at report time from the other tracks' figures per split) on the trace, and records
  the trial's hook calls as one attempt;
- `analyze` (see `trb._analysis`) turns the ledger into figures, the governance gap, the
  baselines table and the profile vector.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from trustbench._canonical import file_sha256
from trustbench.core import (
    CandidateSpec,
    ExperimentSpec,
    Manifest,
    Resolution,
    ResolvedItem,
    SubjectDescription,
    TrialContext,
    TrialKey,
    TrialOutcome,
    cross_product,
    trial_order,
)
from trustbench.errors import CheckFailed, InputError
from trustbench.providers import ChatReply, ChatRequest
from trustbench.trb.adapter._protocol import TRB_VERSION
from trustbench.trb.corpus._sealed import count_exposure, sealed_report_view, withheld_message
from trustbench.trb.track._adapters import (
    DECLARED_SETTINGS,
    HF_PROXY,
    HF_SETTINGS,
    AdapterSource,
    LoadedCorpus,
    NotApplicable,
    adapter_id,
    corpus_folder,
    corpus_items,
    load_corpus,
    resolve_adapters,
)
from trustbench.trb.track._measures import TrbMeasure, load_measures, world_skips
from trustbench.trb.track._pipeline import BUILTIN_CORPUS, TrbTrackOptions, track_options
from trustbench.trb.track._profile import (
    library_trial,
    measure_trace,
    model_size,
    prepare_adapter,
)

if TYPE_CHECKING:
    from trustbench.core import LedgerContents, TrackAnalysis
    from trustbench.core.figures import Figure
    from trustbench.trb.corpus._format import AnyTrace

T = TypeVar("T")

CALL_NAME = "adapter.hooks"
"""The attempt `call` of a trial's batch of hook calls."""


REPLICA_SKIPS = frozenset({"grounding", "viability", "navigability"})
"""Measures a reference seed replica (`trace-ai-full@seed=K`) is not run on: it exists for
Delta_gov's seed-and-trace interval (Track 1), and these are the costly rollouts."""
REPLICA_WHY = "seed replica: measured for Delta_gov's seed interval (Tracks 1 and 3) only"


def trial_skips(
    source: AdapterSource, measures: Sequence[TrbMeasure], world_id: str
) -> dict[str, str]:
    """Measure key -> why it is not run on a trial.

    A seed replica's skips, and the measures that cannot run in the corpus's world yet
    (`world_skips`).
    """
    skip = dict.fromkeys(REPLICA_SKIPS, REPLICA_WHY) if source.seed_replica is not None else {}
    return {**world_skips(measures, world_id), **skip}


@dataclass
class _Prepared:
    """What a spec resolves to in this process (memoised per spec and base folder)."""

    options: TrbTrackOptions
    corpus: LoadedCorpus
    cases: dict[str, AnyTrace]
    measures: list[tuple[TrbMeasure, str]]


def gap_pair(spec: ExperimentSpec, options: TrbTrackOptions) -> tuple[str, str] | None:
    """The (full, ablation) candidate names Delta_gov compares, or None when there is none.

    Raises:
        InputError: `track_options.gap` names a candidate that does not exist.
    """
    names = [c.name for c in spec.candidates]
    if options.gap is not None:
        unknown = [n for n in options.gap if n not in names]
        if unknown:
            raise InputError(f"unknown candidate(s) {unknown}", location="track_options/gap")
        return options.gap
    by_adapter = {adapter_id(c): c.name for c in spec.candidates}
    if "trace-ai-full" in by_adapter and "trace-ai-ablation" in by_adapter:
        return by_adapter["trace-ai-full"], by_adapter["trace-ai-ablation"]
    return None


def _off_loop(fn: Callable[..., T], *args: Any) -> T:
    """Call `fn` here, or in a worker thread when an event loop runs in this thread.

    Adapters are synchronous; some (the chat proxy) drive their own event loop, which cannot
    run inside core's. Core resolves inputs inside its loop, so resolution (the conformance
    kit calls the adapter) runs in a thread then; it blocks this thread either way.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn(*args)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn, *args).result()


def run_settings(options: TrbTrackOptions) -> dict[str, Any]:
    """The track sizes every measure reads from its adapter (`_measure_common._settings`)."""
    return {
        "viability_rollouts": options.viability_rollouts,
        "navigation_samples": options.navigation_samples,
        "max_enumeration_nodes": options.max_enumeration_nodes,
        "r_star": {"adversarial": options.r_star_adversarial_per_step,
                   "ood": options.r_star_ood_per_step},
    }  # fmt: skip


def _output(call: dict[str, Any]) -> Any:
    """A logged call's output, or `{"error": ...}` when it raised (seed calls return None)."""
    return {"error": call["error"]} if "error" in call else call.get("output")


class TrbProfileTrack:
    """The `trb/profile` core track and analyzer (see the module docstring)."""

    subject_description = SubjectDescription(subject_type="endpoint", information_condition="trace")
    """Each candidate is an adapter over one model, given each held-out trace."""

    def __init__(self) -> None:
        self._prepared: dict[tuple[str, str], _Prepared] = {}
        self._sources: dict[tuple[str, str], dict[str, AdapterSource]] = {}

    def _prepare(self, spec: ExperimentSpec, base_dir: Path) -> _Prepared:
        key = (spec.model_dump_json(), str(base_dir))
        if key not in self._prepared:
            options = track_options(spec)
            measures = load_measures(options.measures)
            corpus = load_corpus(corpus_folder(spec, options, base_dir))
            cases = corpus.held_out(options)
            if not cases:
                raise InputError(
                    f"the corpus has no traces in the requested splits {list(options.splits)}",
                    location=str(corpus.folder),
                )
            for name in options.splits:
                info = corpus.manifest.splits.get(name)
                if name not in corpus.splits and info is not None and info.sealed is not None:
                    raise InputError(withheld_message(name, info), location=str(corpus.folder))
                if not corpus.splits.get(name):
                    raise InputError(
                        f"the corpus has no {name!r} split; drop it from track_options.splits",
                        location=str(corpus.folder),
                    )
            gap_pair(spec, options)
            self._prepared[key] = _Prepared(options, corpus, cases, measures)
        return self._prepared[key]

    def candidate_settings(self, candidate: CandidateSpec) -> frozenset[str]:
        """The `settings` keys this track reads of an in-process candidate (core warns of others).

        A `proxy:hf` model's folder, device and dtype, and the declarations any candidate may
        make. An API candidate's settings are request fields, sent as written: none are added.
        """
        if candidate.kind != "inprocess":
            return frozenset()
        return DECLARED_SETTINGS | (HF_SETTINGS if candidate.model == HF_PROXY else frozenset())

    def resolve(self, spec: ExperimentSpec, base_dir: Path) -> Resolution:
        """Corpus files, reference checkpoints, user adapter code and the measure list."""
        if spec.corpus.families is not None:  # an RTB selection: TRB traces have no families
            raise InputError(
                "a TRB corpus has no contrast families: size it with track_options.corpus_sizes",
                location="corpus/families",
            )
        prepared = self._prepare(spec, base_dir)
        sources, adapter_items = _off_loop(
            resolve_adapters, list(spec.candidates), prepared.corpus, prepared.options, True,
            base_dir,
        )  # fmt: skip
        self._sources[(spec.model_dump_json(), str(base_dir))] = sources
        return self._resolution(spec, prepared, adapter_items)

    def resolve_frozen(self, manifest: Manifest) -> Resolution:
        """`resolve` for a frozen run (`verify`, `report`, `run` before trials): runs nothing.

        No adapter worker is started and no conformance kit runs. A submitted adapter is
        untrusted code: re-checking a finished run must not run it, and `run` must compare its
        files with the manifest before starting it (its first trial's `_source` starts the
        worker, after this check).
        """
        spec, base_dir = manifest.spec, Path(manifest.base_dir)
        prepared = self._prepare(spec, base_dir)
        _, adapter_items = _off_loop(
            resolve_adapters, list(spec.candidates), prepared.corpus, prepared.options, False,
            base_dir,
        )  # fmt: skip
        return self._resolution(spec, prepared, adapter_items)

    def _resolution(
        self, spec: ExperimentSpec, prepared: _Prepared, adapter_items: list[ResolvedItem]
    ) -> Resolution:
        """The corpus, the adapters' files and the measure list, to hash."""
        items = corpus_items(prepared.corpus) + adapter_items
        items += [ResolvedItem("measure", m.key, text=target) for m, target in prepared.measures]
        corpus_sha = prepared.corpus.manifest.corpus_sha256
        root = (
            f"builtin:{BUILTIN_CORPUS}"
            if spec.corpus.builtin is not None
            else str(prepared.corpus.folder)
        )
        return Resolution(
            corpus_version=f"{TRB_VERSION} corpus sha256:{corpus_sha}",
            corpus_root=root,
            items=items,
        )

    def on_freeze(self, manifest: Manifest, run_dir: Path, reason: str = "") -> list[str]:
        """Count a freeze against each sealed transfer split the run uses (`corpus._sealed`)."""
        prepared = self._prepare(manifest.spec, Path(manifest.base_dir))
        corpus = prepared.corpus
        return count_exposure(
            corpus.folder, corpus.manifest, list(prepared.options.splits), manifest, reason=reason
        )

    def before_run(self, manifest: Manifest, run_dir: Path) -> list[str]:
        """Record the run in each sealed transfer split's exposure log before any trial."""
        prepared = self._prepare(manifest.spec, Path(manifest.base_dir))
        corpus = prepared.corpus
        return count_exposure(
            corpus.folder, corpus.manifest, list(prepared.options.splits), manifest,
            run_dir=run_dir,
        )  # fmt: skip

    def plan(self, manifest: Manifest) -> Sequence[TrialKey]:
        """Every held-out trace for every adapter, `trials_per_case` times."""
        prepared = self._prepare(manifest.spec, Path(manifest.base_dir))
        return cross_product(sorted(prepared.cases), manifest)

    def prepared(
        self, manifest: Manifest
    ) -> tuple[TrbTrackOptions, LoadedCorpus, dict[str, AnyTrace], list[tuple[TrbMeasure, str]]]:
        """Options, corpus, cases and measures of a frozen run, after checking the corpus.

        Raises:
            CheckFailed: a corpus file no longer matches the hash frozen in the manifest.
        """
        prepared = self._prepare(manifest.spec, Path(manifest.base_dir))
        frozen = manifest.file_sha()
        for item in corpus_items(prepared.corpus):
            assert item.path is not None
            if frozen.get(("corpus", item.name)) != file_sha256(item.path):
                raise CheckFailed(
                    f"corpus file {item.name} differs from the one frozen in the manifest",
                    location=str(item.path),
                )
        return prepared.options, prepared.corpus, prepared.cases, prepared.measures

    def _source(self, manifest: Manifest, candidate: str) -> AdapterSource:
        key = (manifest.spec.model_dump_json(), manifest.base_dir)
        if key not in self._sources:
            self.resolve(manifest.spec, Path(manifest.base_dir))
        return self._sources[key][candidate]

    async def run_trial(self, key: TrialKey, ctx: TrialContext) -> TrialOutcome:
        """Run every measure on one trace through a fresh adapter; record the hook calls."""
        prepared = self._prepare(ctx.manifest.spec, Path(ctx.manifest.base_dir))
        trace = prepared.cases[key.case_id]
        source = self._source(ctx.manifest, key.candidate)
        seed = prepared.options.adapter_seed + key.trial_index
        outcome: dict[str, Any] = {"split": trace.split, "adapter": source.adapter, "seed": seed}
        loop = asyncio.get_running_loop()

        def transport(request: ChatRequest) -> ChatReply:
            # The hooks run on a worker thread; the call itself runs on core's loop, through
            # the candidate's provider: declared retries, rate limit, every attempt recorded.
            return asyncio.run_coroutine_threadsafe(ctx.chat(request), loop).result()

        try:
            inner = source.build_for(trace, transport, prepared.corpus.encoding(trace.split))
        except NotApplicable as reason:
            return TrialOutcome(
                "completed", {**outcome, "applicable": False, "reason": str(reason)}
            )
        tier = getattr(inner, "tier", None)
        outcome["adapter_tier"] = str(getattr(tier, "value", tier))
        options = prepared.options
        recorder = prepare_adapter(
            inner,
            fit_traces=prepared.corpus.traces("train")[: options.grounding_fit_traces],
            settings=run_settings(options),
            seed=seed,
            blind_key=ctx.manifest.manifest_sha256,
            trusted_native=source.model is not None,
            trace=trace,
            foreign=list(prepared.cases.values()),
        )
        sandbox = getattr(inner, "sandbox", None)
        outcome["isolation"] = sandbox or "in-process (a built-in adapter of the benchmark)"
        # Built-in adapters run in-process and only they: their size is the harness's reading.
        outcome["model_size"] = model_size(inner, sandbox is None)
        results: dict[str, Any] = {}
        error: Exception | None = None
        world_id = prepared.corpus.manifest.world_id
        skip = trial_skips(source, [m for m, _ in prepared.measures], world_id)

        def measure_all() -> None:
            try:
                results.update(
                    measure_trace([m for m, _ in prepared.measures], recorder, trace, seed, skip)
                )
            finally:
                close = getattr(inner, "close", None)
                if callable(close):  # e.g. a chat proxy's HTTP session and event loop
                    close()

        try:
            # In a worker thread: the hooks are synchronous (they would stall core's loop)
            # and a chat proxy runs its own event loop, which cannot nest in core's.
            await asyncio.to_thread(measure_all)
        except NotApplicable as reason:
            return TrialOutcome(
                "completed", {**outcome, "applicable": False, "reason": str(reason)}
            )
        except Exception as failure:  # a raising seed() or a measure defect: failed, recorded
            error = failure
        ctx.record_call(
            CALL_NAME,
            request={
                "trace_id": trace.trace_id,
                "split": trace.split,
                "seed": seed,
                "hooks": [
                    {k: v for k, v in c.items() if k not in ("output", "error")}
                    for c in recorder.calls
                ],
            },
            response={"outputs": [_output(c) for c in recorder.calls]},
            latency_s=recorder.seconds,
            error_class=None if error is None else "candidate_error",
            error_message=None if error is None else f"{type(error).__name__}: {error}",
            model_id=source.adapter,
        )
        if error is not None:
            return TrialOutcome(
                "failed",
                outcome,
                error_class="candidate_error",
                error=f"{type(error).__name__}: {error}",
            )
        return TrialOutcome(
            "completed",
            {
                **outcome,
                "applicable": True,
                "measures": results,
                "responses": recorder.responses(),
                "consistency": recorder.consistency(),
            },
        )

    def analyze(self, manifest: Manifest, ledger: LedgerContents) -> TrackAnalysis:
        """Grade the run from its ledger (see `trustbench.trb.track._analysis`)."""
        from trustbench.trb.track._analysis import analyze_profile

        options, corpus, cases, measures = self.prepared(manifest)
        analysis = analyze_profile(
            manifest,
            ledger,
            options=options,
            corpus=corpus,
            cases=cases,
            measures=[m for m, _ in measures],
            gap=gap_pair(manifest.spec, options),
        )
        # A sealed split's trials stay out of the run folder's report (the candidate's report).
        return sealed_report_view(
            analysis, corpus.folder, corpus.manifest, list(options.splits),
            ledger=ledger, cases=cases,
        )  # fmt: skip


@dataclass(frozen=True)
class TrbProfile:
    """A TRB profile measured in this process (`trustbench.trb.measure_profile`)."""

    profile: dict[str, dict[str, Any]]
    """Candidate -> profile axis (G, ground, attr, viab, nav, trans) -> its entry (status,
    headline figure, value, bounds, reason): `record.json`'s `trb.profile` for the same run."""
    governance_gap: dict[str, Any]
    """Delta_gov between the declared (full, ablation) pair: `record.json`'s
    `trb.governance_gap` (status "not run" when the spec has no such pair)."""
    figures: dict[str, list[Figure]]
    """Candidate -> every figure behind the profile (split-prefixed names off eval)."""


def profile_of_manifest(manifest: Manifest) -> TrbProfile:
    """Measure a `trb/profile` manifest's candidates here, as `trb run` would, without a ledger.

    Each trial is the track's (`run_trial`): the same adapters, fit traces, sizes, seeds
    (`adapter_seed + trial index`), opaque trace ids (keyed by the manifest's SHA-256) and
    seed-replica skips; the figures, profile and Delta_gov come from the report's own code
    (`_analysis.profile_and_gap`). A chat candidate is built without core's provider (no
    transport: its adapter's own client), so its retries are not recorded.
    """
    from trustbench.trb.track._analysis import profile_and_gap
    from trustbench.trb.track._profile import Collected, add_trial, renamed_encoding_splits

    track = TrbProfileTrack()
    options, corpus, cases, measures = track.prepared(manifest)
    loaded = [m for m, _ in measures]
    fit = corpus.traces("train")[: options.grounding_fit_traces]
    sources = {c.name: track._source(manifest, c.name) for c in manifest.spec.candidates}

    def build(trace: AnyTrace, source: AdapterSource) -> Any:
        return source.build_for(trace, None, corpus.encoding(trace.split))

    collected = Collected(renamed_encoding_splits(corpus))
    # In the run's own seeded order, so the rows (and so the bootstrap draws over them) come
    # in the order a run at concurrency 1 records them.
    for key in trial_order(list(track.plan(manifest)), manifest.spec.order_seed):
        source, trace = sources[key.candidate], cases[key.case_id]
        skip = trial_skips(source, loaded, corpus.manifest.world_id)
        outcome = library_trial(
            lambda t, s=source: build(t, s), trace, loaded, fit, run_settings(options),
            options.adapter_seed + key.trial_index, source.model is not None,
            manifest.manifest_sha256, skip, foreign=list(cases.values()),
        )  # fmt: skip
        add_trial(collected, loaded, key.candidate, trace, failed=outcome.pop("_failed"),
                  outcome=outcome, trial_index=key.trial_index)  # fmt: skip
    profile, gap_record, figures = profile_and_gap(
        manifest, collected, options=options, corpus_sha=corpus.manifest.corpus_sha256,
        measures=loaded, gap=gap_pair(manifest.spec, options),
    )  # fmt: skip
    return TrbProfile(profile=profile, governance_gap=gap_record, figures=figures)
