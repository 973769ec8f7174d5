"""The RTB end-to-end workflow track (`rtb/workflow`): agents act through tools, driven by core.

Spec: "In end-to-end evaluation, the agent chooses its plan and actions ... Compare their outcomes
and constraint violations without pretending they processed identical proposals."

- **Cases are workflow scenarios.** `plan` = every corpus case given to the agent as a task
  (`direct`) plus the seeded stateful scenarios (`workflow_scenarios`), filtered by
  `track_options.kinds`, x candidates x K. The scenario id (`<case_id>/<kind>`) is the ledger's
  case id; it is never shown to the agent.
- **Candidates are agent x boundary configurations.** A scripted agent is an `inprocess`
  candidate with `settings = { agent = "honest" | ..., boundary = "reference" | ...,
  budget = {...} }`; its `entry` names an agent factory called with those settings (default,
  when none is given: `trustbench.rtb.workflow:scripted_agent`, hashed with the harness code).
  The LLM agent is an `openai_chat` (or `anthropic_messages`) candidate: its settings go to the
  model API, so its boundary and budget come from `track_options` (`boundary`, `budget`, and per
  candidate `candidates.<name>.boundary` / `.budget`). Every chat turn goes through `ctx.chat`,
  so core records each attempt (retries, raw request and response, tokens, cost, latency).
- **What is recorded where.** The trial outcome holds the whole `WorkflowTrialRun`: every task
  brief, tool call with its arguments and result, model call with its usage, harness action, the
  termination, the protected observer's log, the agent's working folder and environment. Model
  calls are *also* ledger attempts (by `ctx.chat`), with the exact messages sent. Scripted agents
  make no model call, so their trials have no attempts; their tool calls are in the outcome.
- **Fresh state per trial.** `run_workflow_trial` builds a new platform, boundary, memory folder
  and agent for every trial (with unpredictable ids); state carries over only between the steps
  of one scenario's declared sequence.
- **A model that cannot be reached** (`CallFailed` after the declared retries) ends the trial as
  `failed` with its error class, but the outcome still holds everything recorded until then: any
  effect already caused is graded, and the trial stays in every denominator.
- **A person in a review chain** (a `human` member with a declared time limit) answers at the
  live review desk (`rtb.human._desk`), which `before_run` serves on 127.0.0.1 for the run,
  printing one private link per person.
- **Grading happens in `analyze`, from the ledger only** (`_workflow_analysis.py`).

Track options (`[track_options]`): `scenario_seed` (int, default 0), `observation_deadline_s`
(simulated seconds, default 600), `kinds` (scenario kinds to run; default all), `scenarios`
(scenario ids to run; default all of those kinds), `boundary`
(default boundary for API candidates, default `reference`), `budget` (a `WorkflowBudget`:
`max_steps`, `max_tokens`, `max_wall_s`, `max_cost_usd`), `candidates` (per-candidate
`boundary` / `budget` overrides).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from trustbench.core import (
    CallFailed,
    Resolution,
    ResolvedItem,
    SubjectDescription,
    TrialKey,
    TrialOutcome,
    cross_product,
)
from trustbench.errors import InputError
from trustbench.providers import AttemptResult, ChatProvider, ChatRequest, HttpPool
from trustbench.rtb.control._options import options_error
from trustbench.rtb.corpus._load import (
    Corpus,
    corpus_folder,
    corpus_items,
    corpus_location,
    declared_subset,
    harness_code_items,
    load_corpus,
)
from trustbench.rtb.policy._registry import policy_for
from trustbench.rtb.review._loop import (
    ReviewChainGate,
    check_review_chain,
    context_asker,
    supports_live_review,
)
from trustbench.rtb.workflow import (
    SYSTEM_PROMPT,
    ChatTurn,
    LLMAgent,
    ModelUsage,
    ToolCallRequest,
    WorkflowScenario,
    run_workflow_trial,
    workflow_scenarios,
)

if TYPE_CHECKING:
    from trustbench import core
    from trustbench.core import ProgressReporter
    from trustbench.rtb.human._desk import ReviewDesk
    from trustbench.rtb.review._options import ReviewerAccess
from trustbench.rtb.workflow._config import (
    _HARNESS_CODE,
    DIRECT_KIND,
    KNOWN_KINDS,
    SCRIPTED_ENTRY,
    CandidateOverrides,
    ScriptedSettings,
    WorkflowConfiguration,
    WorkflowTrackOptions,
    _check_entry,
    agent_entry,
    boundary_entries,
    code_loader,
    configuration,
    configuration_record,
    workflow_boundary_factory,
)
from trustbench.sandbox import RemoteObject

__all__ = [
    "SCRIPTED_ENTRY",
    "CandidateOverrides",
    "CoreChat",
    "ScriptedSettings",
    "WorkflowConfiguration",
    "WorkflowTrack",
    "WorkflowTrackOptions",
    "corpus_folder",
    "demo_spec_path",
    "loop_demo_spec_path",
    "run_loop_demo",
    "run_workflow_demo",
]


class _UsageTap:
    """Wraps the trial's provider so the track learns each call's reported usage.

    `ctx.chat` returns only the parsed reply; tokens and cost live on the attempt it records.
    The tap sums them over the attempts of one call (transport retries included) so the
    workflow budget meter is charged what the ledger shows.
    """

    def __init__(self, inner: ChatProvider) -> None:
        self._inner = inner
        self.requested_model = inner.requested_model
        self.endpoint = inner.endpoint
        self._usage: list[AttemptResult] = []

    def for_trial(self) -> _UsageTap:
        return self

    async def send(self, request: ChatRequest, timeout_s: float) -> AttemptResult:
        result = await self._inner.send(request, timeout_s)
        self._usage.append(result)
        return result

    def take(self) -> ModelUsage:
        """Usage of the attempts since the last call, then forget them."""
        results, self._usage = self._usage, []

        def total(values: list[int | None]) -> int | None:
            known = [v for v in values if v is not None]
            return sum(known) if known else None

        costs = [r.cost_usd for r in results]
        return ModelUsage(
            prompt_tokens=total([r.prompt_tokens for r in results]),
            completion_tokens=total([r.completion_tokens for r in results]),
            cost_usd=None if any(c is None for c in costs) else sum(c or 0.0 for c in costs),
        )


class CoreChat:
    """The LLM agent's chat function over `ctx.chat` (retry policy, attempts, usage, cost).

    Args:
        ctx: The trial's context (its provider is wrapped to read usage).
    """

    def __init__(self, ctx: core.TrialContext) -> None:
        if ctx.provider is None:
            raise CallFailed("client_error", f"candidate {ctx.candidate.name} has no provider")
        self._tap = _UsageTap(ctx.provider)
        ctx.provider = self._tap
        self._ctx = ctx
        self.failure: CallFailed | None = None
        """The call failure that ended the trial, if one did."""

    async def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> ChatTurn:
        """One chat turn through core; a `CallFailed` is kept and re-raised (ends the trial)."""
        request = ChatRequest(messages=[dict(m) for m in messages], tools=tools, tool_choice="auto")
        try:
            reply = await self._ctx.chat(request)
        except CallFailed as error:
            self.failure = error
            raise
        return ChatTurn(
            content=reply.text,
            tool_calls=[
                ToolCallRequest(id=call.id, name=call.name, arguments=call.arguments)
                for call in reply.tool_calls
            ],
            usage=self._tap.take(),
        )


def _in_a_worker(value: Any) -> bool:
    """Whether `value` stands for an object in a candidate's sandbox worker."""
    return isinstance(value, RemoteObject)


def _sandboxed_boundary(
    entry: str | None, candidate: core.CandidateSpec, spec: core.ExperimentSpec
) -> bool:
    """Whether a `boundary_entry` runs in the candidate's sandbox worker."""
    from trustbench.core import isolation_of

    own = entry is None or entry.startswith("trustbench.")
    return not own and isolation_of(candidate, spec) == "sandbox"


class WorkflowTrack:
    """The `rtb/workflow` track: resolve, plan, run one trial, and analyse a run."""

    subject_description = SubjectDescription(
        subject_type="agent application",
        information_condition="tools",
        # `WorkflowTools.tools()`; `read_change_records` only where the platform holds
        # governance records.
        tools=(
            "read_resource", "list_approvals", "read_change_records", "request_change",
            "list_checkpoints", "resume_checkpoint", "edit_labels", "verify_change",
            "write_note", "read_notes", "report_completion",
        ),
    )  # fmt: skip
    """Each candidate is an agent x boundary configuration acting through the track's tools."""

    def __init__(self) -> None:
        self._corpora: dict[str, Corpus] = {}
        self._scenarios: dict[tuple[Any, ...], dict[str, WorkflowScenario]] = {}
        self._agent_locks: dict[str, asyncio.Lock] = {}
        self._desk: ReviewDesk | None = None
        """The live review desk of the run in progress (None: no person in any chain)."""

    @staticmethod
    def options(spec: core.ExperimentSpec) -> WorkflowTrackOptions:
        """Validate `track_options`, naming the offending option."""
        try:
            options = WorkflowTrackOptions.model_validate(spec.track_options)
        except ValidationError as error:
            raise options_error(error, "track_options") from None
        unknown = sorted(set(options.kinds or ()) - set(KNOWN_KINDS))
        if unknown:
            raise InputError(
                f"unknown scenario kind(s) {unknown}; known: {', '.join(KNOWN_KINDS)}",
                location="track_options.kinds",
            )
        for chain_name, chain in options.review_chains.items():
            check_review_chain(f"track_options.review_chains.{chain_name}", chain)
        names = {c.name for c in spec.candidates}
        stray = sorted(set(options.candidates) - names)
        if stray:
            raise InputError(
                f"options for unknown candidate(s) {stray}", location="track_options.candidates"
            )
        return options

    def corpus(self, root: str) -> Corpus:
        """The validated corpus at a manifest root (cached)."""
        if root not in self._corpora:
            self._corpora[root] = load_corpus(corpus_folder(root))
        return self._corpora[root]

    def scenarios(self, manifest: core.Manifest) -> dict[str, WorkflowScenario]:
        """The experiment's scenarios by id, rebuilt from the corpus and the frozen options."""
        options = self.options(manifest.spec)
        families = manifest.spec.corpus.families
        key = (
            manifest.corpus.root,
            None if families is None else tuple(families),
            options.scenario_seed,
            options.observation_deadline_s,
            options.kinds,
            options.scenarios,
        )
        if key not in self._scenarios:
            wanted = set(options.kinds or KNOWN_KINDS)
            listed = [sid.rpartition("/") for sid in options.scenarios or ()]
            corpus = self.corpus(manifest.corpus.root)
            built = workflow_scenarios(
                declared_subset(corpus, families).cases,
                seed=options.scenario_seed,
                deadline_s=options.observation_deadline_s,
                # an id ends in its kind: only the kinds the listed ids name are built, and
                # only the direct tasks of the cases they name
                kinds=wanted if options.scenarios is None else wanted & {k for _, _, k in listed},
                direct_case_ids=(
                    None
                    if options.scenarios is None
                    else {case for case, _, kind in listed if kind == DIRECT_KIND}
                ),
            )
            chosen = {s.scenario_id: s for s in built if s.script.kind in wanted}
            if options.scenarios is not None:
                unknown = sorted(set(options.scenarios) - set(chosen))
                if unknown:
                    raise InputError(
                        f"unknown scenario id(s) {unknown} (of the selected kinds)",
                        location="track_options.scenarios",
                    )
                chosen = {sid: chosen[sid] for sid in options.scenarios}
            self._scenarios[key] = chosen
        return self._scenarios[key]

    def resolve(self, spec: core.ExperimentSpec, base_dir: Path) -> Resolution:
        """Check candidates and options; list the corpus, the agent prompt and harness code."""
        options = self.options(spec)
        configurations: list[WorkflowConfiguration] = []
        for candidate in spec.candidates:
            configurations.append(configuration(candidate, options, spec))
            if candidate.kind == "inprocess":
                _check_entry(candidate, spec)
        _check_time_for_people(spec, options, configurations)
        resolution = self._inputs(spec, base_dir)
        policy_id = self.corpus(resolution.corpus_root).policy_id
        if options.review_chains and not supports_live_review(policy_id):
            raise InputError(
                f"the corpus policy {policy_id} cannot show a live proposal to a reviewer; "
                "review chains need a corpus whose policy has a live review input",
                location="track_options.review_chains",
            )
        return resolution

    def resolve_frozen(self, manifest: core.Manifest) -> Resolution:
        """`resolve` for a frozen experiment, building no agent or boundary (`verify`, `run`).

        Building one imports and runs the candidate's code, which could then patch the hashing
        that judges it; the freeze already built each.
        """
        return self._inputs(manifest.spec, Path(manifest.base_dir))

    def _inputs(self, spec: core.ExperimentSpec, base_dir: Path) -> Resolution:
        """The corpus, the agent prompt and the harness code to hash."""
        root, label = corpus_location(spec, base_dir)
        corpus = self.corpus(label)
        declared_subset(corpus, spec.corpus.families)  # refuses an unknown family at freeze
        items = corpus_items(root, corpus)
        items.append(ResolvedItem("prompt", "workflow_agent_system", text=SYSTEM_PROMPT))
        items += harness_code_items((*_HARNESS_CODE, *policy_for(corpus.policy_id).source_files))
        entries = boundary_entries(spec.candidates, self.options(spec))
        return Resolution(
            corpus_version=corpus.version, corpus_root=label, items=items, code_entries=entries
        )

    def figure_names(self, spec: core.ExperimentSpec) -> set[str]:
        """Figure names a gate may read (checked at freeze)."""
        from trustbench.rtb.workflow._grading import figure_names

        return figure_names(spec.trials_per_case)

    def declared_limits(self, spec: core.ExperimentSpec) -> dict[str, str]:
        """Each chain member's declared limits, per candidate whose loop has a review chain.

        The report's system-under-test block prints them: a person's enforced time limit and
        budget (as the reviewer track prints a participant's), a model member's one reply per
        proposal under the spec's `timeout_s`.
        """
        from trustbench.rtb.review._options import human_limits

        options = self.options(spec)
        limits: dict[str, str] = {}
        for candidate in spec.candidates:
            name = _chain_of(candidate, options)
            if name not in options.review_chains:
                continue
            chain = options.review_chains[name]
            stated = []
            if chain.self_review is not None:
                stated.append(f"self ({chain.self_review}): one reply per proposal")
            for member in chain.members:
                if member.participant is not None:
                    said = human_limits(chain.access.get(member.name), member.participant)
                    said = said.replace("per case", "per proposal")  # the loop's unit
                else:
                    said = "one reply per proposal (the spec's timeout_s per call)"
                stated.append(f"{member.name}: {said}")
            limits[candidate.name] = f"review chain {name}: " + "; ".join(stated)
        return limits

    def before_run(self, manifest: core.Manifest, run_dir: Path) -> list[str]:
        """Serve the live review desk when a configuration's chain names a person.

        Called by `trustbench run` on its event loop before any trial starts: the desk binds
        127.0.0.1 on a free port and prints one private link per person to the operator.
        """
        people = _people_in_the_loop(manifest.spec, self.options(manifest.spec))
        self._desk = None
        if not people:
            return []
        from trustbench.rtb.human._desk import ReviewDesk

        self._desk = ReviewDesk(self.corpus(manifest.corpus.root).policy_id, people)
        self._desk.open()
        return [f"live review desk served for {', '.join(sorted(people))} (links printed above)"]

    def plan(self, manifest: core.Manifest) -> Sequence[TrialKey]:
        """Every scenario x candidate x `trials_per_case`."""
        return cross_product(list(self.scenarios(manifest)), manifest)

    async def run_trial(self, key: TrialKey, ctx: core.TrialContext) -> TrialOutcome:
        """Run one scenario with a fresh agent, boundary and platform; return the whole record."""
        scenario = self.scenarios(ctx.manifest)[key.case_id]
        spec = ctx.manifest.spec
        config = configuration(ctx.candidate, self.options(spec), spec)
        load = code_loader(ctx.candidate, spec)
        chat: CoreChat | None = None
        actor: list[LLMAgent] = []  # the LLM agent once built: its conversation for self-review
        agent_lock: Any = contextlib.nullcontext()
        sandboxed = _sandboxed_boundary(config.boundary_entry, ctx.candidate, spec)
        if ctx.candidate.kind == "inprocess":
            make: Any = load(agent_entry(ctx.candidate), f"candidate {ctx.candidate.name} entry")
            settings = dict(ctx.candidate.settings)
            sandboxed = sandboxed or _in_a_worker(make)

            def agent_factory() -> Any:
                return make(settings)

        else:
            chat = CoreChat(ctx)
            core_chat = chat

            def agent_factory() -> Any:
                actor.append(LLMAgent(core_chat, name=ctx.candidate.name))
                return actor[-1]

        if sandboxed:
            # A sandboxed agent's `run` awaits the harness's tools while its worker waits, and a
            # boundary's worker must not be left busy by a timed-out call: the candidate's trials
            # run one at a time.
            agent_lock = self._agent_locks.setdefault(ctx.candidate.name, asyncio.Lock())
        async with agent_lock, HttpPool(4) as pool:
            gate = self._review_gate(config, ctx, pool, actor)
            run = await run_workflow_trial(
                scenario.script,
                agent_factory,
                workflow_boundary_factory(config, dict(ctx.candidate.settings), load),
                budget=config.budget,
                review_gate=gate,
                record_call=ctx.record_call,
            )
        outcome: dict[str, Any] = {
            "scenario_id": scenario.scenario_id,
            "configuration": configuration_record(config),
            "run": run.model_dump(mode="json"),
        }
        if gate is not None:
            outcome["reviews"] = gate.reviews
        if chat is not None and chat.failure is not None:
            return TrialOutcome(
                status="failed",
                outcome=outcome,
                error_class=chat.failure.error_class,
                error=str(chat.failure),
            )
        return TrialOutcome(status="completed", outcome=outcome)

    def _review_gate(
        self,
        config: WorkflowConfiguration,
        ctx: core.TrialContext,
        pool: HttpPool,
        actor: list[LLMAgent],
    ) -> ReviewChainGate | None:
        """The trial's review chain, each member called through the trial's context.

        `actor` holds the LLM agent once the trial builds it: a self-review reads its
        conversation as it stands when a proposal is reviewed.
        """
        if config.review_chain is None:
            return None
        chain = self.options(ctx.manifest.spec).review_chains[config.review_chain]
        prompt = self.corpus(ctx.manifest.corpus.root).review_prompt
        return ReviewChainGate(
            config.review_chain,
            chain,
            prompt,
            context_asker(ctx, pool, self._desk.providers() if self._desk else None),
            lambda: ctx.attempts_recorded,
            actor=ctx.candidate,
            conversation=lambda: actor[-1].conversation if actor else [],
            actor_tools=lambda: actor[-1].tool_specs if actor else [],
        )

    def analyze(self, manifest: core.Manifest, ledger: core.LedgerContents) -> core.TrackAnalysis:
        """Grade every recorded trial from the ledger and build figures, sections and record."""
        from trustbench.rtb.workflow._analysis import analyze_workflow_run

        return analyze_workflow_run(manifest, ledger, self)


def _people_in_the_loop(
    spec: core.ExperimentSpec, options: WorkflowTrackOptions
) -> dict[str, ReviewerAccess]:
    """The declared limits of every person in a chain some candidate's configuration uses.

    Read from the frozen settings without building any agent or boundary (`resolve_frozen`).
    """
    people: dict[str, ReviewerAccess] = {}
    for candidate in spec.candidates:
        chain = _chain_of(candidate, options)
        if chain in options.review_chains:
            people.update(options.review_chains[chain].human_limits())
    return people


def _chain_of(candidate: core.CandidateSpec, options: WorkflowTrackOptions) -> str | None:
    """The review chain a candidate's configuration names, from its frozen settings."""
    if candidate.kind == "inprocess":
        declared = candidate.settings.get("review_chain")
        return declared if isinstance(declared, str) else None
    return options.candidates.get(candidate.name, CandidateOverrides()).review_chain


def _check_time_for_people(
    spec: core.ExperimentSpec,
    options: WorkflowTrackOptions,
    configurations: Sequence[WorkflowConfiguration],
) -> None:
    """Refuse a trial limit shorter than the time a person in its chain is given per proposal.

    A proposal waits for each person in turn up to their declared limit; a trial timeout or an
    agent wall budget shorter than that would cut the person off and record the wrong failure.

    Raises:
        InputError: Naming `trial_timeout_s` or the candidate's `budget.max_wall_s`.
    """
    for config in configurations:
        if config.review_chain is None:
            continue
        limits = options.review_chains[config.review_chain].human_limits().values()
        needed = sum(float(access.time_limit_s or 0.0) for access in limits)
        if not needed:
            continue
        for where, limit in (
            ("trial_timeout_s", spec.trial_timeout_s),
            (f"candidate {config.candidate} budget.max_wall_s", config.budget.max_wall_s),
        ):
            if limit is not None and limit <= needed:
                raise InputError(
                    f"{limit:g} s leaves no time for the people of review chain "
                    f"{config.review_chain!r}, who are given {needed:g} s per proposal: raise "
                    "it above that (or lower their declared time_limit_s)",
                    location=where,
                )


def demo_spec_path() -> Path:
    """The built-in demonstration spec (`rtb/experiments/demo_workflow.toml`)."""
    return Path(str(files("trustbench"))) / "rtb" / "experiments" / "demo_workflow.toml"


def run_workflow_demo(
    out_dir: Path | str, progress: ProgressReporter | None = None
) -> core.ReportResult:
    """Freeze, run (quietly) and report the built-in workflow demo into `out_dir`.

    Scripted agents (harness instruments with known signatures) with the reference boundary and
    one weaker boundary (`trusts-resource-labels`), every built-in scenario, K=1, on the simulated
    platform. Gates are evaluated but never raised: the false-claiming and forging
    configurations are expected to fail them, and the report says so.

    Args:
        out_dir: Run folder (created; an identical earlier freeze there is resumed).
        progress: Where the run's progress goes (default: nowhere).

    Returns:
        The report result: `html_path`, `record_path`, per-configuration gate results, `blocked`.
    """
    from trustbench.core import run_spec

    return run_spec(demo_spec_path(), Path(out_dir), progress=progress).report


def loop_demo_spec_path() -> Path:
    """The built-in example of reviewers in the loop (`rtb/experiments/demo_loop.toml`)."""
    return Path(str(files("trustbench"))) / "rtb" / "experiments" / "demo_loop.toml"


def run_loop_demo(
    out_dir: Path | str, progress: ProgressReporter | None = None
) -> core.ReportResult:
    """Freeze, run and report the built-in example of reviewers in the loop into `out_dir`.

    The scripted `reckless` agent's proposals put to the reference policy reviewer, an
    in-process "self" reviewer sharing the agent's blind spot (alone, twice, and followed by a
    sentinel), behind the `reference` and `unchecked` boundaries, on the 24 scenarios its spec
    names: which reviewer catches what a control misses, which control stops what a reviewer
    missed, and the joint decisions of two reviewers (`record.json` `workflow.review_loop`). No
    release gate.

    Args:
        out_dir: Run folder (created; an identical earlier freeze there is resumed).
        progress: Where the run's progress goes (default: nowhere).

    Returns:
        The report result.
    """
    from trustbench.core import run_spec

    return run_spec(loop_demo_spec_path(), Path(out_dir), progress=progress).report
