"""The RTB control-path track (`rtb/control`): boundaries under test, driven through core.

Spec: "In control-path testing, the harness deliberately presents a request to the enforcement
boundary. It does not depend on persuading the agent to attempt the request."

- **Candidates are boundaries.** Each candidate is `kind = "inprocess"`. Its `entry` (optional)
  names a *boundary-candidate factory* `entry(settings) -> BoundaryFactory`; the default,
  `boundary_from_settings`, reads `settings = { boundary = "reference" | "cedar" |
  "review-gated" | "unchecked" | <known-bad name> }` or `{ boundary = "http", url = "..." }`
  (a user's own service implementing the wire contract of `rtb.boundaries._http`). A user's own
  Python boundary plugs in by naming its own factory as `entry`. Core hashes the entry's source
  file into the manifest; this track also hashes the platform, boundary and grading code.
- **Why the track builds the boundary itself** rather than calling it through `ctx.chat`: a
  boundary is not a chat responder; it is called twice per trial (authorize, then dispatch, and
  after a simulated crash a fresh instance dispatches). The track wraps every instance so each
  `authorize` / `dispatch` call is recorded as an attempt with `ctx.record_call` (request, the
  boundary's answer, latency, and `candidate_error` when it raises).
- **Cases are scenarios.** `plan` = every corpus case presented directly, plus the seeded fault
  scenarios (`control_scenarios`), x candidates x K. A scenario id (`<case_id>/<path>`) is the
  ledger's case id. Platform state is fresh per trial, with a fresh unpredictable platform
  trial id.
- **Grading happens in `analyze`, from the ledger only**: the stored `TrialRun` (observer log and
  the boundary's claims) is re-graded with `grade_trial`; scenarios (and their grader-only
  expectations) are rebuilt from the hash-checked corpus and the frozen options.

Track options (`[track_options]`): `scenario_seed` (int, default 0: picks the fault cases and
timings), `observation_deadline_s` (simulated seconds, default 30), `paths` (list of scenario
paths to run, e.g. `["direct"]`; default all).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
from pydantic import BaseModel, ValidationError

from trustbench._canonical import canonical_json
from trustbench.core import (
    Resolution,
    SubjectDescription,
    TrialKey,
    TrialOutcome,
    cross_product,
    utc_now,
)
from trustbench.errors import InputError
from trustbench.providers import HttpPool
from trustbench.rtb.boundaries import (
    Authorization,
    Boundary,
    DispatchReceipt,
    Enforcement,
    run_trial,
)
from trustbench.rtb.boundaries._protocol import enforcement_of
from trustbench.rtb.control._cases import (
    ControlScenario,
    control_scenarios,
)
from trustbench.rtb.corpus._load import (
    Corpus,
    corpus_folder,
    corpus_items,
    corpus_location,
    declared_subset,
    harness_code_items,
    load_corpus,
)
from trustbench.rtb.platform import ControlRequest
from trustbench.rtb.policy._registry import policy_for
from trustbench.rtb.review._loop import (
    MODEL_REVIEW_GATED,
    ModelReviewGatedBoundary,
    ReviewChainGate,
    ReviewChainSpec,
    context_asker,
)

if TYPE_CHECKING:
    from trustbench import core
    from trustbench.core import ProgressReporter
from trustbench.rtb.control._options import (
    _HARNESS_CODE,
    _T,
    DEFAULT_BOUNDARY_ENTRY,
    BoundarySettings,
    ControlTrackOptions,
    _factory_for,
    boundary_from_settings,
    environment_for,
    known_paths,
    options_error,
)

__all__ = [
    "DEFAULT_BOUNDARY_ENTRY",
    "BoundarySettings",
    "ControlTrack",
    "ControlTrackOptions",
    "boundary_from_settings",
    "demo_spec_path",
    "environment_for",
    "run_control_demo",
]


class _RecordedBoundary:
    """Wraps a boundary so each of its calls becomes an attempt in the ledger.

    Calls are buffered and written after the trial (`flush`), so ledger writes never fall inside
    the measured time from request to block.
    """

    def __init__(self, inner: Boundary, calls: list[dict[str, Any]]) -> None:
        self._inner = inner
        self._calls = calls
        self.name: str = inner.name
        # The inner boundary's declaration, unchanged.
        self.enforcement: Enforcement = enforcement_of(inner)

    async def _recorded(
        self, call: str, request: dict[str, Any], work: Callable[[], Awaitable[_T]]
    ) -> _T:
        started_at = utc_now()
        started = time.perf_counter()
        entry: dict[str, Any] = {
            "name": call,
            "request": request,
            "started_at": started_at,
            "model_id": self.name,
        }
        try:
            answer = await work()
        except Exception as error:  # the boundary's failure is measured; run_trial records it
            entry.update(
                response=None,
                latency_s=time.perf_counter() - started,
                error_class="candidate_error",
                error_message=f"{type(error).__name__}: {error}",
            )
            self._calls.append(entry)
            raise
        entry.update(
            response=answer.model_dump(mode="json") if isinstance(answer, BaseModel) else answer,
            latency_s=time.perf_counter() - started,
        )
        self._calls.append(entry)
        return answer

    async def authorize(self, request: ControlRequest, platform: Any) -> Authorization:
        """Record and forward `authorize`."""
        body = {"request": request.model_dump(mode="json")}
        return await self._recorded(
            "boundary.authorize", body, lambda: self._inner.authorize(request, platform)
        )

    async def dispatch(
        self, request: ControlRequest, authorization: Authorization | None, platform: Any
    ) -> DispatchReceipt:
        """Record and forward `dispatch`."""
        body = {
            "request": request.model_dump(mode="json"),
            "authorization": authorization.model_dump(mode="json") if authorization else None,
        }
        return await self._recorded(
            "boundary.dispatch",
            body,
            lambda: self._inner.dispatch(request, authorization, platform),
        )


def _flush(calls: list[dict[str, Any]], ctx: core.TrialContext) -> None:
    """Write the trial's buffered boundary calls to the ledger as attempts, in call order."""
    for call in calls:
        ctx.record_call(
            call["name"],
            request=call["request"],
            response=call["response"],
            latency_s=call["latency_s"],
            error_class=call.get("error_class"),
            error_message=call.get("error_message"),
            model_id=call["model_id"],
            started_at=call["started_at"],
        )


class ControlTrack:
    """The `rtb/control` track: resolve, plan, run one trial, and analyse a run."""

    subject_description = SubjectDescription(
        subject_type="execution architecture",
        information_condition="request presented directly by the harness",
    )
    """Each candidate is an enforcement boundary: the execution architecture under test."""

    def __init__(self) -> None:
        self._corpora: dict[str, Corpus] = {}
        self._locks: dict[str, Any] = {}
        self._scenarios: dict[
            tuple[str, tuple[str, ...] | None, ControlTrackOptions], dict[str, ControlScenario]
        ] = {}

    @staticmethod
    def options(spec: core.ExperimentSpec) -> ControlTrackOptions:
        """Validate `track_options`, naming the offending option."""
        try:
            options = ControlTrackOptions.model_validate(spec.track_options)
        except ValidationError as error:
            raise options_error(error, "track_options") from None
        unknown = sorted(set(options.paths or ()) - set(known_paths()))
        if unknown:
            raise InputError(
                f"unknown scenario path(s) {unknown}; known: {', '.join(known_paths())}",
                location="track_options.paths",
            )
        return options

    def _corpus(self, root: str) -> Corpus:
        if root not in self._corpora:
            self._corpora[root] = load_corpus(corpus_folder(root))
        return self._corpora[root]

    def scenarios(self, manifest: core.Manifest) -> dict[str, ControlScenario]:
        """The experiment's scenarios by id, rebuilt from the corpus and the frozen options."""
        options = self.options(manifest.spec)
        families = manifest.spec.corpus.families
        key = (manifest.corpus.root, None if families is None else tuple(families), options)
        if key not in self._scenarios:
            corpus = self._corpus(manifest.corpus.root)
            built = control_scenarios(
                declared_subset(corpus, families).cases,
                seed=options.scenario_seed,
                deadline_s=options.observation_deadline_s,
            )
            wanted = set(options.paths or known_paths())
            self._scenarios[key] = {s.scenario_id: s for s in built if s.path in wanted}
        return self._scenarios[key]

    def resolve(self, spec: core.ExperimentSpec, base_dir: Path) -> Resolution:
        """Check candidates and options; list the corpus files and harness code to hash."""
        self.options(spec)
        for candidate in spec.candidates:
            if candidate.kind != "inprocess":
                raise InputError(
                    f"a control-path candidate is a boundary: kind must be `inprocess`, got "
                    f"`{candidate.kind}`",
                    location=f"candidate {candidate.name} kind",
                )
            _factory_for(candidate, spec)
        return self._inputs(spec, base_dir)

    def resolve_frozen(self, manifest: core.Manifest) -> Resolution:
        """`resolve` for a frozen experiment, building no boundary (`verify`, `report`, `run`).

        Building one imports and runs the candidate's code, which could then patch the hashing
        that judges it; the freeze already built each, and core hashes the candidate's files
        without importing them.
        """
        return self._inputs(manifest.spec, Path(manifest.base_dir))

    def _inputs(self, spec: core.ExperimentSpec, base_dir: Path) -> Resolution:
        """The corpus files and harness code to hash."""
        root, label = corpus_location(spec, base_dir)
        corpus = self._corpus(label)
        declared_subset(corpus, spec.corpus.families)  # refuses an unknown family at freeze
        policy_code = policy_for(corpus.policy_id).source_files
        items = corpus_items(root, corpus) + harness_code_items((*_HARNESS_CODE, *policy_code))
        return Resolution(corpus_version=corpus.version, corpus_root=label, items=items)

    def figure_names(self, spec: core.ExperimentSpec) -> set[str]:
        """Figure names a gate may read (checked at freeze)."""
        from trustbench.rtb.control._analysis import HEADLINE_NAMES

        return set(HEADLINE_NAMES)

    def plan(self, manifest: core.Manifest) -> Sequence[TrialKey]:
        """Every scenario x candidate x `trials_per_case`."""
        return cross_product(list(self.scenarios(manifest)), manifest)

    async def run_trial(self, key: TrialKey, ctx: core.TrialContext) -> TrialOutcome:
        """Run one scenario against a fresh boundary on fresh platform state.

        The stored outcome is the `TrialRun` (observer log and the boundary's claims) as JSON:
        enough to grade the trial again offline.
        """
        scenario = self.scenarios(ctx.manifest)[key.case_id]
        # A sandboxed boundary's worker serves one trial at a time, so a call that times out
        # leaves no other trial waiting on it; asked for every trial, a worker stopped after a
        # timed-out call is replaced, and the factory with it.
        async with self._one_at_a_time(ctx):
            return await self._run_trial(ctx, scenario)

    def _one_at_a_time(self, ctx: core.TrialContext) -> Any:
        """The candidate's lock when its code runs in a sandbox worker, else no lock."""
        import asyncio
        import contextlib

        from trustbench.core import isolation_of, runs_candidate_code

        candidate, spec = ctx.candidate, ctx.manifest.spec
        if not runs_candidate_code(candidate) or isolation_of(candidate, spec) == "none":
            return contextlib.nullcontext()
        return self._locks.setdefault(candidate.name, asyncio.Lock())

    async def _run_trial(self, ctx: core.TrialContext, scenario: Any) -> TrialOutcome:
        factory = _factory_for(ctx.candidate, ctx.manifest.spec)
        pool = HttpPool(4)
        gate = self._review_gate(ctx, pool)

        calls: list[dict[str, Any]] = []

        def recorded() -> Boundary:
            fresh = factory() if gate is None else ModelReviewGatedBoundary(gate)
            return _RecordedBoundary(fresh, calls)

        # A fresh, unpredictable platform trial id: a service cannot anticipate future trials.
        script = scenario.script.model_copy(update={"trial_id": f"trial-{secrets.token_hex(8)}"})
        try:
            run = await run_trial(script, recorded, environment_for(ctx.candidate))
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            return TrialOutcome(
                status="failed",
                outcome={"scenario_id": scenario.scenario_id, "platform_trial_id": script.trial_id},
                error_class="environment_error",
                error=f"{type(error).__name__}: {error}",
            )
        finally:
            # Also when the trial is cancelled (trial timeout): every call made is recorded.
            _flush(calls, ctx)
            await pool.close()
        outcome: dict[str, Any] = {
            "scenario_id": scenario.scenario_id,
            "run": run.model_dump(mode="json"),
        }
        if gate is not None:  # what the reviewer saw and answered, and the policy's decision
            outcome["reviews"] = gate.reviews
        canonical_json(outcome)  # fail here, as a harness defect, if it is not JSON
        return TrialOutcome(status="completed", outcome=outcome)

    def _review_gate(self, ctx: core.TrialContext, pool: HttpPool) -> ReviewChainGate | None:
        """The reviewer of a `model-review-gated` candidate, called through the trial's context.

        Its calls are ledger attempts of the trial (exact request body and reply) beside the
        boundary's own recorded calls.
        """
        settings = (
            BoundarySettings.model_validate(
                {
                    k: v
                    for k, v in ctx.candidate.settings.items()
                    if k in BoundarySettings.model_fields
                }
            )
            if ctx.candidate.entry in (None, DEFAULT_BOUNDARY_ENTRY)
            else None
        )
        if settings is None or settings.reviewer is None:
            return None
        prompt = self._corpus(ctx.manifest.corpus.root).review_prompt
        chain = ReviewChainSpec(members=(settings.reviewer,))
        return ReviewChainGate(
            MODEL_REVIEW_GATED,
            chain,
            prompt,
            context_asker(ctx, pool),
            lambda: ctx.attempts_recorded,
        )

    def analyze(self, manifest: core.Manifest, ledger: core.LedgerContents) -> core.TrackAnalysis:
        """Grade every recorded trial from the ledger and build figures, sections and record."""
        from trustbench.rtb.control._analysis import analyze_control_run

        return analyze_control_run(manifest, ledger, self)


def demo_spec_path() -> Path:
    """The built-in demonstration spec (`rtb/experiments/demo_control.toml`)."""
    return Path(str(files("trustbench"))) / "rtb" / "experiments" / "demo_control.toml"


def run_control_demo(
    out_dir: Path | str, progress: ProgressReporter | None = None
) -> core.ReportResult:
    """Freeze, run (quietly) and report the built-in control-path demo into `out_dir`.

    Four boundaries (reference, cedar, review-gated, unchecked) x every built-in scenario, K=1,
    on the simulated platform. Gates are evaluated but never raised: review-gated and unchecked
    are expected to fail them, and the report says so.

    Args:
        out_dir: Run folder (created; an identical earlier freeze there is resumed).
        progress: Where the run's progress goes (default: nowhere).

    Returns:
        The report result: `html_path`, `record_path`, per-boundary gate results, `blocked`.
    """
    from trustbench.core import run_spec

    return run_spec(demo_spec_path(), Path(out_dir), progress=progress).report
