"""Configuration of the workflow track: options, scenario kinds, each candidate's agent x boundary.

Kept apart from `track.py` so grading and analysis read the configuration without importing the
track (and the track imports them, never the reverse).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, Field, StrictFloat, StrictInt, ValidationError

from trustbench._docstrings import documented
from trustbench._imports import import_object
from trustbench.errors import InputError
from trustbench.rtb.boundaries import BoundaryFactory, Enforcement, boundary_factory, enforcement_of
from trustbench.rtb.control._options import options_error
from trustbench.rtb.review._loop import ReviewChainSpec, check_self_review
from trustbench.rtb.workflow import (
    DEFAULT_WORKFLOW_DEADLINE_S,
    WorkflowBudget,
    WorkflowKind,
)

if TYPE_CHECKING:
    from trustbench.core import CandidateSpec, ExperimentSpec


SCRIPTED_ENTRY = "trustbench.rtb.workflow:scripted_agent"
"""The entry of the built-in scripted agents (the measurement instruments of the audit)."""
DIRECT_KIND = "direct"
"""Kind of the scenarios that give a corpus case to the agent unchanged."""
KNOWN_KINDS: tuple[str, ...] = (DIRECT_KIND, *(kind.value for kind in WorkflowKind))
"""Every scenario kind the scenario builder produces."""
"""Accepted spellings of the built-in corpus version in `corpus.builtin`."""
UNSUPPORTED_BOUNDARIES = ("http",)
"""Boundaries this track cannot run: `http` hosts its own platform, the workflow tools need the
local simulated one."""
TRACK_KEYS = ("agent", "boundary", "boundary_entry", "budget", "review_chain")
"""Settings keys the track reads; for an API candidate they would be sent to the model."""
_HARNESS_CODE = (
    "rtb/platform/*.py",
    "rtb/boundaries/*.py",
    "rtb/control/_cases.py",
    "rtb/policy/*.py",
    "rtb/workflow/*.py",
    "rtb/review/_loop.py",
)
"""Platform, boundary, tool, scenario and grading code hashed into the manifest (role
`harness_code`): the environment and the scoring rules are frozen with the experiment (the
corpus policy's `source_files` are added at resolve time)."""


class _Strict(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class CandidateOverrides(_Strict):
    """Per-candidate options in `track_options.candidates.<name>`."""

    boundary: str | None = None
    """Boundary under test for this candidate (overrides `track_options.boundary`)."""
    boundary_entry: str | None = None
    """`module:attribute` of a boundary entry (as a control-path candidate's `entry`: called
    with the settings, returns a boundary factory); replaces `boundary`."""
    budget: WorkflowBudget | None = None
    """Per-trial budget for this candidate (replaces `track_options.budget`)."""
    review_chain: str | None = None
    """Name of a `track_options.review_chains` entry reviewing this candidate's proposals."""


class WorkflowTrackOptions(_Strict):
    """`[track_options]` of an `rtb/workflow` experiment."""

    scenario_seed: StrictInt = 0
    """Seed that picks each group's case for every stateful kind and the fault timings."""
    observation_deadline_s: StrictFloat = Field(default=DEFAULT_WORKFLOW_DEADLINE_S, gt=0)
    """Simulated seconds after trial start by which the observer must establish outcomes."""
    kinds: tuple[str, ...] | None = None
    """Scenario kinds to run (`direct` and the stateful kinds); None runs every kind."""
    scenarios: tuple[str, ...] | None = None
    """Scenario ids (`<case_id>/<kind>`) to run, e.g. for a small smoke run; None runs every
    scenario of the selected kinds. Never shown to an agent."""
    boundary: str = "reference"
    """Boundary under test for API (LLM) candidates that name none in `candidates`."""
    budget: WorkflowBudget = WorkflowBudget()
    """Per-trial budget of every candidate that declares none of its own."""
    candidates: dict[str, CandidateOverrides] = Field(default_factory=dict)
    """Candidate name -> boundary / budget overrides (the way to configure an API candidate)."""
    review_chains: dict[str, ReviewChainSpec] = Field(default_factory=dict)
    """Chain name -> reviewers in order and their aggregation; a candidate names one as its
    `review_chain` to put every mutating proposal to it before the boundary."""


class ScriptedSettings(_Strict):
    """`settings` of an in-process (scripted) workflow candidate."""

    agent: str
    """Scripted agent name (`honest`, `reckless`, `metadata-forging`, `false-claiming`,
    `memory-poisoned`), or what the candidate's own `entry` understands."""
    boundary: str | None = None
    """Boundary under test (`reference`, `cedar`, `review-gated`, `unchecked`, a known-bad
    name such as `trusts-resource-labels`); required unless `boundary_entry` is given."""
    boundary_entry: str | None = None
    """`module:attribute` of a boundary entry, the same callable a control-path candidate names
    as its `entry` (called with these settings, returns a boundary factory)."""
    budget: WorkflowBudget | None = None
    """Per-trial budget (default: `track_options.budget`)."""
    review_chain: str | None = None
    """Name of a `track_options.review_chains` entry reviewing this agent's proposals."""


class WorkflowConfiguration(_Strict):
    """What one candidate is, as the track runs and reports it."""

    candidate: str
    """Candidate name (the report's subject)."""
    agent_kind: str
    """`scripted` (a harness instrument) or `llm` (a model through core's provider)."""
    agent: str
    """Scripted agent name, or the requested model id."""
    boundary: str
    """Boundary under test (its name; for an entry, the name its instances report)."""
    boundary_entry: str | None = None
    """The boundary entry, when the boundary was given by `boundary_entry`."""
    enforcement: Enforcement = "enforcing"
    """What the boundary declares it is (`Boundary.enforcement`): decides whether a failure
    through it is a candidate's failure or an instrument's expected, detected one."""
    budget: WorkflowBudget
    """Per-trial budget."""
    review_chain: str | None = None
    """The review chain between the agent and the boundary (None: proposals go straight on)."""


def configuration_record(config: WorkflowConfiguration) -> dict[str, Any]:
    """A configuration as records hold it; `review_chain` only when there is one.

    A chain-less configuration is recorded exactly as before review chains existed.
    """
    return config.model_dump(mode="json", exclude=None if config.review_chain else {"review_chain"})


def _chain_name(
    name: str | None, options: WorkflowTrackOptions, where: str, actor: CandidateSpec
) -> str | None:
    """A candidate's review chain, which must be declared in `track_options.review_chains`.

    A chain with `self_review` must be named by an actor with a model (and, for
    `in_conversation`, a conversation) of its own (`check_self_review`).
    """
    if name is None:
        return None
    if name not in options.review_chains:
        known = ", ".join(sorted(options.review_chains)) or "none declared"
        raise InputError(f"unknown review chain {name!r} (known: {known})", location=where)
    check_self_review(f"track_options.review_chains.{name}", options.review_chains[name], actor)
    return name


EntryLoader = Callable[[str, str], Any]
"""`load(entry, what)`: the object an entry names (imported here, or standing for it in the
candidate's sandbox worker: `code_loader`)."""


def code_loader(candidate: CandidateSpec, spec: ExperimentSpec | None) -> EntryLoader:
    """How a candidate's entries are loaded: through its sandbox (`core.candidate_entry`).

    Without a spec (a library caller building a configuration by hand) they are imported here.
    """
    if spec is None:
        return lambda entry, what: import_object(entry, what=what)
    from trustbench.core import candidate_entry

    return lambda entry, what: candidate_entry(candidate, spec, entry)[0]


def _entry_factory(
    entry: str, settings: dict[str, Any], where: str, load: EntryLoader
) -> BoundaryFactory:
    make = load(entry, f"{where} (boundary entry)")
    try:
        factory = make(settings)
    except InputError as error:
        raise InputError(error.message, location=where) from None
    if not callable(factory):
        raise InputError(f"boundary entry {entry} must return a boundary factory", location=where)
    return cast(BoundaryFactory, factory)  # a user's entry: only its callability can be checked


def _resolve_boundary(
    name: str | None, entry: str | None, settings: dict[str, Any], where: str, load: EntryLoader
) -> tuple[str, str | None, Enforcement]:
    """(name, entry, declared enforcement) of a candidate's boundary, checked now.

    One instance is built, so a bad setting fails the freeze and the boundary's own declaration
    (`enforcement`, read by `enforcement_of`) is what classifies it, never its name.
    """
    if entry is not None:
        factory = _entry_factory(entry, settings, where, load)
    elif name is None:
        raise InputError("a boundary or boundary_entry is required", location=where)
    elif name in UNSUPPORTED_BOUNDARIES:
        raise InputError(
            f"boundary {name!r} is not supported by the workflow track (its tools act on the "
            "local simulated platform)",
            location=where,
        )
    else:
        try:
            factory = boundary_factory(name)
        except InputError as error:
            raise InputError(error.message, location=where) from None
    boundary = factory()
    try:
        enforcement = enforcement_of(boundary)
    except ValueError as error:
        raise InputError(str(error), location=where) from None
    return (name or str(getattr(boundary, "name", entry))), entry, enforcement


def workflow_boundary_factory(
    config: WorkflowConfiguration, settings: dict[str, Any], load: EntryLoader
) -> BoundaryFactory:
    """The factory of fresh boundaries for one candidate (its entry, else the built-in name)."""
    if config.boundary_entry is not None:
        where = f"candidate {config.candidate}"
        return _entry_factory(config.boundary_entry, settings, where, load)
    return boundary_factory(config.boundary)


def configuration(
    candidate: CandidateSpec, options: WorkflowTrackOptions, spec: ExperimentSpec | None = None
) -> WorkflowConfiguration:
    """Resolve one candidate's agent, boundary and budget, naming any bad setting.

    Raises:
        InputError: An unknown boundary or agent, or track settings on an API candidate.
    """
    where = f"candidate {candidate.name}"
    load = code_loader(candidate, spec)
    override = options.candidates.get(candidate.name, CandidateOverrides())
    if candidate.kind == "inprocess":
        try:
            settings = ScriptedSettings.model_validate(
                {k: v for k, v in candidate.settings.items() if k in TRACK_KEYS}
            )
        except ValidationError as error:
            raise options_error(error, f"{where} settings") from None
        if candidate.name in options.candidates:
            raise InputError(
                "configure an in-process candidate in its own settings, not in track_options",
                location=f"track_options.candidates.{candidate.name}",
            )
        name, entry, enforcement = _resolve_boundary(
            settings.boundary,
            settings.boundary_entry,
            dict(candidate.settings),
            f"{where} settings.{'boundary_entry' if settings.boundary_entry else 'boundary'}",
            load,
        )
        return WorkflowConfiguration(
            candidate=candidate.name,
            agent_kind="scripted" if agent_entry(candidate) == SCRIPTED_ENTRY else "in-process",
            agent=settings.agent,
            boundary=name,
            boundary_entry=entry,
            enforcement=enforcement,
            budget=settings.budget or options.budget,
            review_chain=_chain_name(
                settings.review_chain, options, f"{where} settings.review_chain", candidate
            ),
        )
    clash = sorted(set(candidate.settings) & set(TRACK_KEYS))
    if clash:
        raise InputError(
            f"settings {clash} would be sent to the model API; set them in "
            f"track_options.candidates.{candidate.name}",
            location=f"{where} settings",
        )
    name, entry, enforcement = _resolve_boundary(
        None if override.boundary_entry else (override.boundary or options.boundary),
        override.boundary_entry,
        {},
        f"track_options.candidates.{candidate.name}.boundary",
        load,
    )
    return WorkflowConfiguration(
        candidate=candidate.name,
        agent_kind="llm",
        agent=candidate.model or candidate.name,
        boundary=name,
        boundary_entry=entry,
        enforcement=enforcement,
        budget=override.budget or options.budget,
        review_chain=_chain_name(
            override.review_chain,
            options,
            f"track_options.candidates.{candidate.name}.review_chain",
            candidate,
        ),
    )


def boundary_entries(
    candidates: Sequence[CandidateSpec], options: WorkflowTrackOptions
) -> list[tuple[str, str]]:
    """`(entry, where)` of every candidate's `boundary_entry`, read from the spec, not imported.

    Core pins each entry's code in the manifest as it pins a candidate's own `entry`: a boundary
    module edited after the run would otherwise leave `verify` saying "intact".
    """
    found = []
    for candidate in candidates:
        if candidate.kind == "inprocess":
            entry = candidate.settings.get("boundary_entry")
            where = f"candidate {candidate.name} settings.boundary_entry"
        else:
            entry = options.candidates.get(candidate.name, CandidateOverrides()).boundary_entry
            where = f"track_options.candidates.{candidate.name}.boundary_entry"
        if isinstance(entry, str) and entry:
            found.append((entry, where))
    return found


def agent_entry(candidate: CandidateSpec) -> str:
    """The agent factory of an in-process candidate: its `entry`, else the scripted agents."""
    return candidate.entry or SCRIPTED_ENTRY


def _check_entry(candidate: CandidateSpec, spec: ExperimentSpec) -> None:
    """Build one agent from an in-process entry now (in its sandbox): a bad setting fails here."""
    where = f"candidate {candidate.name}"
    make = code_loader(candidate, spec)(agent_entry(candidate), f"{where} entry")
    try:
        agent = make(dict(candidate.settings))
    except InputError as error:
        raise InputError(
            error.message, location=f"{where} settings.{error.location or ''}".rstrip(".")
        ) from None
    if not callable(getattr(agent, "run", None)):
        raise InputError(
            f"entry {candidate.entry} must return a workflow agent", location=f"{where} entry"
        )
