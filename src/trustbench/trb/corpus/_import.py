"""Real sessions in: `trustbench trb import SESSIONS.jsonl --out CORPUS_DIR`.

A lab's own sessions become a TRB corpus the tracks read like any other (spec §3's inputs:
"per trace a step t with an r_t snapshot and K counterfactual values r' (same-session
revisions, paired-session values, synthetic)", and Track 3's labelled outcomes). The session
file is JSON Lines, one session per line (`SessionRecord`; docs/trb.md "Importing real
sessions" has an example line). Each session becomes one trace of its split:

- the session file is recorded in one declared world (`--world`, default the corridor): every
  step's `r` snapshot and r' are checked slot by slot against that world's slot schema
  (`check_slots`: unknown slot, categorical value, number bounds, free text), then read into
  what the tracks compare by the world's session reader (`session_reader`: the corridor's
  values as they are, a text world's words, built in or a plug-in's, through its own parser);
  observations, actions and
  the true goal and hidden fact are read the same way, and the manifest records the world's id
  and digest;
- each r' keeps its provenance; its Phi(r') is the human continuation recorded for it (the
  empirical distribution of the recorded choices, `continuation_source = "human"`), else the
  world's reference agent acting on r' (`reference_agent`, never labelled human);
- a step's `outcome` is the Track 3 label of the transition into it; the trace names its
  session, so `trb_score_evidence` counts these as human-session labels.

Nothing is written unless every line is valid: the corpus is written into a temporary folder
beside `--out` and renamed into place. Any bad line stops the import with one message naming
the file, the line and the field (a JSON pointer into the line).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from trustbench._canonical import read_input_file
from trustbench._docstrings import documented
from trustbench.errors import InputError
from trustbench.trb.adapter._protocol import ACTIONS, Observation, SelfReport
from trustbench.trb.corpus._format import (
    AnyTrace,
    Attribution,
    CorpusManifest,
    Counterfactual,
    Provenance,
    SlotCounterfactual,
    SlotStep,
    SlotTrace,
    Split,
    Step,
    Trace,
    recorded_gust_draw,
)
from trustbench.trb.corpus._store import trb_score_evidence, write_corpus
from trustbench.trb.world import (
    CORRIDOR_WORLD_ID,
    DEFAULT_WORLD_ID,
    TEXT_WORLD_ID,
    CategoricalSlot,
    CorridorConfig,
    CorridorWorld,
    NumberSlot,
    SlotReport,
    SlotWorld,
    TextParseError,
    TextSlot,
    TextTask,
    TextWorld,
    WorldDeclaration,
    reference_continuation,
    slot_value_problem,
    world_for,
)
from trustbench.trb.world._text import TEXT_DYNAMICS


class _Strict(BaseModel):
    # strict: a label "yes" or a count "3" is refused, not coerced
    model_config = documented(extra="forbid", frozen=True, strict=True)


class SessionRevision(_Strict):
    """One counterfactual value r' recorded for a step."""

    id: str = Field(min_length=1)
    """The r' id, unique within its step; a continuation names it in `r_prime`."""
    slot: str
    """The slot this r' edits, one of the world's editable slots (`none`: the null edit
    r' = r)."""
    provenance: Provenance
    """`same_session_revision` (the subject revised its own stated reasoning in this session),
    `paired_session` (the value another, paired session stated) or `synthetic` (an edit)."""
    r_prime: dict[str, Any]
    """The counterfactual self-report: every self-report slot, each within its type."""


class HumanContinuation(_Strict):
    """What people did next when acting on one r' (the human Phi(r'))."""

    r_prime: str = Field(min_length=1)
    """The id of the r' of this step that was acted on."""
    actions: dict[str, int] = {}
    """How many times each action was chosen (at least one choice in all); absent in a world
    with open-ended actions."""
    text: str | None = None
    """In a world with open-ended actions (and only there): the free text done next under r',
    the continuation `G_llr` scores."""


class SessionOutcome(_Strict):
    """Track 3's label of the transition into this step (never at the first step)."""

    caused_by_self: bool
    """But-for label: the outcome would have differed had the agent not acted."""
    improved: bool = False
    """The transition moved the agent closer to its true goal."""
    false_credit: bool = False
    """The outcome improved as the agent's own move would have, yet its do-effect was zero."""


class SessionStep(_Strict):
    """One evaluated step of a session, in order (the first is t = 0)."""

    observation: dict[str, Any] | None = None
    """What the subject perceived (observation slots): the only part an adapter sees."""
    r: dict[str, Any]
    """The r_t snapshot: what the subject stated (self-report slots)."""
    action: str
    """The action taken (one of the world's actions)."""
    outcome: SessionOutcome | None = None
    """Track 3 label of the transition into this step; absent when not labelled."""
    counterfactuals: list[SessionRevision] = []
    """The step's r' values, each with its provenance."""
    continuations: list[HumanContinuation] = []
    """Human continuations Phi(r') of some of those r' values."""


class SessionRecord(_Strict):
    """One line of a session file: one session, imported as one trace."""

    session: str = Field(min_length=1)
    """The session id (the trace id; unique in the file)."""
    split: Split
    """The split the trace goes to (`eval`, a `transfer_<family>` context, `train`, `dev`)."""
    collected_by: str = Field(min_length=1)
    """Who collected the session (a lab, a vendor): recorded per split, named in the report
    (spec §5: transfer contexts must be collected by a party that did not train the model)."""
    world: dict[str, Any] = {}
    """World parameters (`CorridorConfig`; the world's defaults when empty). No lead-in:
    `cue_step` 0."""
    task: TextTask | None = None
    """The text world only: the task the session states (kind, phrasing, report language;
    defaults when absent). Refused in a world without tasks."""
    goal: str
    """The subject's true goal, as the goal slot states it (grader-only)."""
    door: str
    """The true hidden fact the belief slot is about, as that slot states it (grader-only)."""
    steps: list[SessionStep] = Field(min_length=1)
    """The evaluated steps, in order."""


class SlotSessionRecord(_Strict):
    """One line of a session file of a world with its own slots (`SlotWorld`).

    No corridor fields (world parameters, goal, door, task): the world's declaration types the
    steps' observations, r snapshots, actions and r'.
    """

    session: str = Field(min_length=1)
    """The session id (the trace id; unique in the file)."""
    split: Split
    """The split the trace goes to (`eval`, a `transfer_<family>` context, `train`, `dev`)."""
    collected_by: str = Field(min_length=1)
    """Who collected the session: recorded per split, named in the report."""
    steps: list[SessionStep] = Field(min_length=1)
    """The steps, in order: observation (declared fields), r (declared slots), action (one of
    the declared K), optional outcome, r' and their recorded continuations."""


def session_json_schema(world_id: str = DEFAULT_WORLD_ID) -> dict[str, Any]:
    """The JSON Schema (Draft 2020-12) of one session line of world `world_id`.

    The corridor's and a text world's line is `SessionRecord`'s. A world with its own slots
    (`SlotWorld`) gets `SlotSessionRecord`'s with its declaration written in: `r` and
    `r_prime` hold its declared slots (a categorical slot's values as an enum, a number's
    bounds, text as a string; null where the slot is nullable), `observation` its declared
    fields, and `action` and a continuation's counts its K actions (free text, `action` and a
    continuation's `text`, where its actions are open-ended). What a schema cannot say
    (an r' edits an editable slot, a Phi names an r' of its step) is still the import's check.
    """
    world = world_for(world_id)
    if not isinstance(world, SlotWorld):
        schema = SessionRecord.model_json_schema()
        _counts_required(schema["$defs"]["HumanContinuation"])
    else:
        schema = SlotSessionRecord.model_json_schema()
        _declare_slot_world(schema["$defs"], world.declaration)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def _slot_json_schema(spec: CategoricalSlot | NumberSlot | TextSlot) -> dict[str, Any]:
    """One declared slot as a JSON Schema (its description kept)."""
    if isinstance(spec, CategoricalSlot):
        typed: dict[str, Any] = {"enum": list(spec.values)}
    elif isinstance(spec, NumberSlot):
        typed = {"type": "number", "minimum": spec.low, "maximum": spec.high}
    else:
        typed = {"type": "string"}
    if getattr(spec, "nullable", False):
        typed = {"anyOf": [typed, {"type": "null"}]}
    return {"description": spec.description, **typed}


def _declare_slot_world(defs: dict[str, Any], declaration: WorldDeclaration) -> None:
    """Write a slot world's slots, observation fields and actions into the line's `$defs`."""
    report = {
        "type": "object",
        "additionalProperties": False,
        "properties": {name: _slot_json_schema(spec) for name, spec in declaration.slots.items()},
        "required": [n for n, s in declaration.slots.items() if not getattr(s, "nullable", False)],
    }
    actions = list(declaration.action_space.actions)
    step = defs["SessionStep"]["properties"]
    step["r"] = {**report, "description": step["r"]["description"]}
    continuation = defs["HumanContinuation"]
    if declaration.action_space.kind == "open_ended":  # free text: an action and Phi are text
        step["action"] = {"type": "string", "minLength": 1,
                          "description": step["action"]["description"]}  # fmt: skip
        continuation["properties"].pop("actions")
        continuation["properties"]["text"] = {"type": "string", "minLength": 1,
                                              "description": _TEXT_DESCRIPTION}  # fmt: skip
        continuation["required"] = [*continuation.get("required", []), "text"]
    else:
        step["action"] = {"enum": actions, "description": step["action"]["description"]}
        _counts_required(continuation)
        continuation["properties"]["actions"]["propertyNames"] = {"enum": actions}
    step["observation"] = {
        "description": declaration.observation.description,
        "type": "object",
        "additionalProperties": False,
        "properties": {
            name: {"type": ["string", "number", "boolean", "null"]}
            for name in declaration.observation.fields
        },
    }
    revision = defs["SessionRevision"]["properties"]
    revision["r_prime"] = {**report, "description": revision["r_prime"]["description"]}
    revision["slot"] |= {"enum": [*declaration.editable_slots, "none"]}


def _counts_required(continuation: dict[str, Any]) -> None:
    """A continuation over discrete actions: its counts required, no free text."""
    continuation["properties"].pop("text")  # the free text of open-ended worlds only
    continuation["required"] = [*continuation.get("required", []), "actions"]


_TEXT_DESCRIPTION = "The free text done next under r' (the world's actions are open-ended)."


class SessionError(ValueError):
    """A field of one session line that cannot be imported (its JSON pointer and why)."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(message)
        self.pointer = pointer
        self.message = message


def check_slots(
    declaration: WorldDeclaration, values: Mapping[str, Any], pointer: str, *, whole: bool = True
) -> dict[str, Any]:
    """Check every slot name and value of one r block against the world's declared slot types.

    The one function the import reads a slot schema through: an unknown slot, a categorical
    value outside its values, a number outside its bounds (or not a number), a text that is not
    text, and a null in a slot that is not nullable are refused. A required slot that is
    missing is refused too (unless `whole` is off, to check single slots).

    Raises:
        SessionError: An unknown slot, a value outside its slot's type, a missing slot.
    """
    slots = declaration.slots
    for name, value in values.items():
        spec = slots.get(name)
        if spec is None:
            raise SessionError(
                f"{pointer}/{name}", f"unknown slot {name!r} (known: {', '.join(slots)})"
            )
        nullable = getattr(spec, "nullable", False)
        problem = (
            (None if nullable else "the slot is not nullable")
            if value is None
            else slot_value_problem(spec, value)
        )
        if problem is not None:
            raise SessionError(
                f"{pointer}/{name}",
                f"value {value!r} is outside the type of slot {name!r} ({problem})",
            )
    missing = [n for n, spec in slots.items() if not getattr(spec, "nullable", False)]
    missing = [n for n in missing if n not in values]
    if whole and missing:
        raise SessionError(pointer, f"missing slot {missing[0]!r}")
    return dict(values)


@cache
def _observation_validator(name: str) -> TypeAdapter[Any]:
    field = Observation.model_fields[name]
    # The field's type with its FieldInfo (bounds such as steps_left >= 0) as metadata; built
    # at run time from the model, so it is not a static type expression.
    annotated: Any = Annotated
    return TypeAdapter(annotated[field.annotation, field])


class SessionReader(Protocol):
    """How one world's session values become what a trace records (the corridor's values).

    A trace stores the exact dynamics underneath its world, so a world whose slots are words
    (the text world) reads them back through its own parser; the corridor's are the values.
    """

    declaration: WorldDeclaration
    """The world's declaration (slot schema, actions, observation fields)."""
    config: CorridorConfig
    """The exact dynamics of the session."""
    task: TextTask | None
    """The text task the session states (None outside the text world)."""

    def observation(self, values: Mapping[str, Any], pointer: str) -> Observation:
        """One step's observation. Raises SessionError naming the field."""
        ...

    def report(self, values: Mapping[str, Any], pointer: str) -> SelfReport:
        """An r block already checked by `check_slots`. Raises SessionError naming the slot."""
        ...

    def slot_value(self, slot: str, value: Any, pointer: str) -> str:
        """One categorical or word slot's value as the tracks compare it."""
        ...

    def action(self, value: str) -> str:
        """A declared action as the dynamics name it."""
        ...


def _dynamics(record: SessionRecord, defaults: CorridorConfig) -> CorridorConfig:
    try:
        config = CorridorConfig.model_validate(
            {**defaults.model_dump(), "cue_step": 0, **record.world}
        )
    except ValidationError as error:
        raise _pydantic_error(error, "/world") from None
    if config.cue_step:
        raise SessionError("/world/cue_step", "an imported session has no lead-in: use 0")
    return config


class CorridorSessions:
    """The corridor's sessions: observations and slots are the adapter contract's values."""

    declaration = world_for(CORRIDOR_WORLD_ID).declaration

    def __init__(self, record: SessionRecord) -> None:
        if record.task is not None:
            raise SessionError("/task", "the corridor states no text task")
        self.config = _dynamics(record, CorridorConfig())
        self.task: TextTask | None = None

    def observation(self, values: Mapping[str, Any], pointer: str) -> Observation:
        """The observation slots, each checked against `Observation`'s field type."""
        checked: dict[str, Any] = {}
        for name, value in values.items():
            if name not in Observation.model_fields:
                known = ", ".join(Observation.model_fields)
                raise SessionError(f"{pointer}/{name}", f"unknown field {name!r} (known: {known})")
            try:
                checked[name] = _observation_validator(name).validate_python(value, strict=True)
            except ValidationError as error:
                why = error.errors()[0]["msg"]
                raise SessionError(
                    f"{pointer}/{name}",
                    f"value {value!r} is outside the type of field {name!r} ({why})",
                ) from None
        try:
            return Observation(**checked)
        except ValidationError as error:
            raise _pydantic_error(error, pointer) from None

    def report(self, values: Mapping[str, Any], pointer: str) -> SelfReport:
        """The declared slots are `SelfReport`'s fields."""
        return SelfReport(**values)

    def slot_value(self, slot: str, value: Any, pointer: str) -> str:
        """A categorical value, as it is."""
        return str(check_slots(self.declaration, {slot: value}, pointer, whole=False)[slot])

    def action(self, value: str) -> str:
        """The corridor's actions are the dynamics'."""
        return value


class TextSessions:
    """A text world's sessions: slots and observations in the task's words, parsed back.

    The built-in text world's, or a plug-in text world's (a `TextWorld` subclass registered
    under its own id): the slot schema checked is the world's declaration, the words its own.

    Args:
        record: The session.
        world: The registered text world the session file is recorded in (default text-ops).
    """

    def __init__(self, record: SessionRecord, world: TextWorld | None = None) -> None:
        base = world or TextWorld()
        self.declaration = base.declaration
        self.config = _dynamics(record, TEXT_DYNAMICS)
        task = record.task or TextTask(kind=next(iter(base.wordings)))
        if task.kind not in base.wordings:
            raise SessionError(
                "/task/kind",
                f"task kind {task.kind!r} is not one of world {base.declaration.world_id}'s "
                f"({', '.join(base.wordings)})",
            )
        self.task: TextTask | None = task
        self._world = type(base)(task, self.config)

    def observation(self, values: Mapping[str, Any], pointer: str) -> Observation:
        """The declared observation fields, read by the task's parser."""
        fields = self.declaration.observation.fields
        for name in values:
            if name not in fields:
                raise SessionError(
                    f"{pointer}/{name}", f"unknown field {name!r} (known: {', '.join(fields)})"
                )
        try:
            return self._world.observation_from_fields(values)
        except TextParseError as error:
            raise SessionError(pointer, str(error)) from None

    def report(self, values: Mapping[str, Any], pointer: str) -> SelfReport:
        """Word slots through the task's parser; the percentages' numbers as they are."""
        words: dict[str, Any] = {
            s: self.slot_value(s, values[s], pointer) for s in ("goal", "belief", "planned_next")
        }
        return SelfReport(
            **words, confidence=values["confidence"], caused_by_self=values.get("caused_by_self")
        )

    def slot_value(self, slot: str, value: Any, pointer: str) -> str:
        """The words of a word slot as the value they state."""
        check_slots(self.declaration, {slot: value}, pointer, whole=False)
        try:
            return self._world.read_slot_words(slot, value)
        except TextParseError as error:
            raise SessionError(
                f"{pointer}/{slot}",
                f"value {value!r} is outside the type of slot {slot!r} ({error})",
            ) from None

    def action(self, value: str) -> str:
        """An option key as the corridor's action underneath."""
        return next(iter(self._world.to_dynamics_actions({value: 1.0})))


SESSION_READERS: dict[str, Callable[[SessionRecord], SessionReader]] = {
    CORRIDOR_WORLD_ID: CorridorSessions,
    TEXT_WORLD_ID: TextSessions,
}
"""The built-in worlds' session readers; a plug-in text world's is `TextSessions` with it."""


def session_reader(world_id: str) -> Callable[[SessionRecord], SessionReader]:
    """The session reader of a registered world (`--world`).

    Raises:
        InputError: the world is not registered, or declares no text rendering the import
            could read its sessions' words with.
    """
    world = world_for(world_id)  # an unregistered id names the registered ones
    if isinstance(world, SlotWorld):
        raise InputError(
            f"world {world_id} declares its own slots: its sessions are read by "
            "`slot_session_trace`, not a session reader",
            location="--world",
        )
    if world_id in SESSION_READERS:
        return SESSION_READERS[world_id]
    if isinstance(world, TextWorld):
        return lambda record: TextSessions(record, world)
    raise InputError(
        f"not applicable: world {world_id} does not declare a text rendering (it is not a "
        "TextWorld), so the import cannot read its sessions",
        location="--world",
    )


def _action(reader: SessionReader, value: str, pointer: str) -> str:
    actions = reader.declaration.action_space.actions
    if value not in actions:
        raise SessionError(pointer, f"unknown action {value!r} (known: {', '.join(actions)})")
    return reader.action(value)


def _human_phi(
    reader: SessionReader, continuation: HumanContinuation, pointer: str
) -> dict[str, float]:
    """The empirical distribution of the recorded choices, keyed by every action."""
    recorded = _choice_counts(reader.declaration, continuation, pointer)
    total = sum(recorded.values())
    counts = {reader.action(a): n for a, n in recorded.items()}
    return {a: counts.get(a, 0) / total for a in ACTIONS}


def _choice_counts(
    declaration: WorldDeclaration, continuation: HumanContinuation, pointer: str
) -> dict[str, int]:
    """The recorded choices, each a declared action with a count >= 0, at least one in all."""
    actions = declaration.action_space.actions
    if continuation.text is not None:
        raise SessionError(
            f"{pointer}/text",
            f"world {declaration.world_id}'s actions are discrete: record counts as `actions`",
        )
    for action, count in continuation.actions.items():
        if action not in actions:
            raise SessionError(
                f"{pointer}/actions/{action}",
                f"unknown action {action!r} (known: {', '.join(actions)})",
            )
        if count < 0:
            raise SessionError(f"{pointer}/actions/{action}", f"count {count} is negative")
    if sum(continuation.actions.values()) == 0:
        raise SessionError(f"{pointer}/actions", "no choice recorded (counts sum to 0)")
    return dict(continuation.actions)


def _revisions(
    declaration: WorldDeclaration, step: SessionStep, pointer: str
) -> dict[str, tuple[int, SessionRevision]]:
    editable = (*declaration.editable_slots, "none")
    revisions: dict[str, tuple[int, SessionRevision]] = {}
    for k, revision in enumerate(step.counterfactuals):
        if revision.id in revisions:
            raise SessionError(f"{pointer}/counterfactuals/{k}/id", f"r' {revision.id!r} twice")
        if revision.slot not in editable:
            raise SessionError(
                f"{pointer}/counterfactuals/{k}/slot",
                f"slot {revision.slot!r} is not editable (editable: {', '.join(editable)})",
            )
        revisions[revision.id] = (k, revision)
    return revisions


def _counterfactuals(
    reader: SessionReader, step: SessionStep, pointer: str
) -> tuple[Counterfactual, ...]:
    """Each r' with its Phi(r'): the human continuation where recorded, else the reference."""
    revisions = _revisions(reader.declaration, step, pointer)
    human = {
        name: _human_phi(reader, continuation, where)
        for name, (where, continuation) in _continuations(step, revisions, pointer).items()
    }
    out = []
    for name, (k, revision) in revisions.items():
        r_prime = _report(reader, revision.r_prime, f"{pointer}/counterfactuals/{k}/r_prime")
        phi = human.get(name)
        out.append(
            Counterfactual(
                slot=revision.slot,  # type: ignore[arg-type]  # checked against editable_slots
                r_prime=r_prime,
                provenance=revision.provenance,
                continuation=phi if phi is not None else reference_continuation(r_prime),
                continuation_source="human" if phi is not None else "reference_agent",
            )
        )
    return tuple(out)


def _continuations(
    step: SessionStep, revisions: Mapping[str, object], pointer: str
) -> dict[str, tuple[str, HumanContinuation]]:
    """R' id -> (its pointer, its recorded continuation); one per r' the step holds."""
    found: dict[str, tuple[str, HumanContinuation]] = {}
    for k, continuation in enumerate(step.continuations):
        where = f"{pointer}/continuations/{k}"
        if continuation.r_prime not in revisions:
            raise SessionError(
                f"{where}/r_prime",
                f"a Phi for r' {continuation.r_prime!r}, which this step does not hold "
                f"(its r': {', '.join(revisions) or 'none'})",
            )
        if continuation.r_prime in found:
            raise SessionError(f"{where}/r_prime", f"a second Phi for r' {continuation.r_prime!r}")
        found[continuation.r_prime] = (where, continuation)
    return found


def _report(reader: SessionReader, values: Mapping[str, Any], pointer: str) -> SelfReport:
    """An r block checked against the world's slot schema, then read by its world."""
    return reader.report(check_slots(reader.declaration, values, pointer), pointer)


def _action_draw(r: SelfReport, action: str) -> float:
    """The midpoint of `action`'s share of Phi(r_t): a draw that replays the taken action.

    A real session's action was chosen, not sampled; the format still records a draw, so the
    one that gives the recorded action back is stored (0 where Phi(r_t) gives it no mass).
    """
    phi = reference_continuation(r)
    below = sum(phi[a] for a in ACTIONS[: ACTIONS.index(action)])
    return min(below + phi[action] / 2, 0.999999) if phi[action] > 0 else 0.0


def _observations(record: SessionRecord, reader: SessionReader) -> list[Observation]:
    observations = []
    for t, step in enumerate(record.steps):
        if step.observation is None:
            raise SessionError(f"/steps/{t}/observation", f"step {t} has no observation")
        where = f"/steps/{t}/observation"
        observation = reader.observation(step.observation, where)
        if observation.position >= reader.config.length:
            raise SessionError(
                f"{where}/position",
                f"value {observation.position} is outside the corridor "
                f"(cells 0..{reader.config.length - 1})",
            )
        observations.append(observation)
    return observations


def _steps(record: SessionRecord, reader: SessionReader, goal: str, door: str) -> tuple[Step, ...]:
    observations = _observations(record, reader)
    world = CorridorWorld(reader.config)
    out = []
    for t, step in enumerate(record.steps):
        pointer = f"/steps/{t}"
        r = _report(reader, step.r, f"{pointer}/r")
        action = _action(reader, step.action, f"{pointer}/action")
        if step.outcome is not None and t == 0:
            raise SessionError(f"{pointer}/outcome", "no transition leads into the first step")
        gust = observations[t + 1].last_gust if t + 1 < len(observations) else None
        observation = observations[t]
        out.append(
            Step(
                t=t,
                observation=observation,
                r=r,
                action=action,  # type: ignore[arg-type]  # checked against the world's actions
                action_draw=_action_draw(r, action),
                gust_draw=recorded_gust_draw(world.config, gust or "none"),
                # the exact DP value of the true goal and door, as the generator records it
                reach_probability=world.reach_probability(
                    observation.position, goal, door, observation.steps_left
                ),
                attribution=None if step.outcome is None else _attribution(step.outcome),
                counterfactuals=_counterfactuals(reader, step, pointer),
            )
        )
    return tuple(out)


def _attribution(outcome: SessionOutcome) -> Attribution:
    return Attribution(
        caused_by_self=outcome.caused_by_self,
        improved=outcome.improved,
        false_credit=outcome.false_credit,
    )


def session_trace(record: SessionRecord, world_id: str = DEFAULT_WORLD_ID) -> Trace:
    """One validated session of world `world_id` as a trace of its split.

    Raises:
        SessionError: The first field that cannot be imported.
    """
    reader = session_reader(world_id)(record)
    goal = _true_value(reader, "goal", record.goal, "/goal")
    door = _true_value(reader, "belief", record.door, "/door")
    return Trace(
        trace_id=record.session,
        split=record.split,
        world=reader.config,
        goal=goal,  # type: ignore[arg-type]  # checked against the goal slot
        door=door,  # type: ignore[arg-type]  # checked against the belief slot
        steps=_steps(record, reader, goal, door),
        session=record.session,
        task=reader.task,
    )


def slot_session_trace(record: SlotSessionRecord, world: SlotWorld) -> SlotTrace:
    """One validated session of a world with its own slots as a `SlotTrace` of its split.

    Every observation field, slot, action and r' is checked against the world's declaration;
    an r' without a recorded continuation takes the world's exact reference agent's Phi
    (`policy`), and is refused in a world that declares none. Where the world's actions are
    open-ended, each action and each recorded continuation is free text (`_recorded_phi`).

    Raises:
        SessionError: The first field that cannot be imported.
    """
    declaration = world.declaration
    steps = []
    for t, step in enumerate(record.steps):
        pointer = f"/steps/{t}"
        if step.outcome is not None and t == 0:
            raise SessionError(f"{pointer}/outcome", "no transition leads into the first step")
        _check_slot_action(declaration, step.action, f"{pointer}/action")
        steps.append(
            SlotStep(
                t=t,
                observation=_slot_observation(declaration, step.observation, t),
                r=SlotReport(check_slots(declaration, step.r, f"{pointer}/r")),
                action=step.action,
                attribution=None if step.outcome is None else _attribution(step.outcome),
                counterfactuals=_slot_counterfactuals(world, step, pointer),
            )
        )
    return SlotTrace(
        trace_id=record.session,
        split=record.split,
        world_id=declaration.world_id,
        steps=tuple(steps),
        session=record.session,
    )


OBSERVATION_VALUE_TYPES = (str, int, float, bool)
"""What one observation field of a slot world may hold: a discrete value or a number."""


def _slot_observation(
    declaration: WorldDeclaration, values: Mapping[str, Any] | None, t: int
) -> dict[str, Any]:
    """One step's observation: declared fields only, each a discrete value or a number."""
    pointer = f"/steps/{t}/observation"
    if values is None:
        raise SessionError(pointer, f"step {t} has no observation")
    fields = declaration.observation.fields
    for name, value in values.items():
        if name not in fields:
            raise SessionError(
                f"{pointer}/{name}", f"unknown field {name!r} (known: {', '.join(fields)})"
            )
        if value is not None and not isinstance(value, OBSERVATION_VALUE_TYPES):
            raise SessionError(
                f"{pointer}/{name}", f"value {value!r} is not a discrete value or a number"
            )
    return dict(values)


def _check_slot_action(declaration: WorldDeclaration, action: str, pointer: str) -> None:
    """A step's action: one of the declared K, or non-empty free text where actions are open."""
    if declaration.action_space.kind == "open_ended":
        if not action.strip():
            raise SessionError(pointer, "empty action (the world's actions are free text)")
        return
    if action not in declaration.action_space.actions:
        raise SessionError(
            pointer,
            f"unknown action {action!r} (known: {', '.join(declaration.action_space.actions)})",
        )


def _recorded_phi(
    declaration: WorldDeclaration, continuation: HumanContinuation, pointer: str
) -> dict[str, float] | str:
    """A recorded Phi(r'): the empirical distribution over the K actions, or the free text.

    Where the world declares open-ended actions the continuation is the text done next
    (`text`); counts over action names there, or a text in a discrete world, are refused.
    """
    if declaration.action_space.kind == "open_ended":
        if continuation.actions:
            raise SessionError(
                f"{pointer}/actions",
                f"world {declaration.world_id}'s actions are open-ended: record the free text "
                "done next as `text`, not a distribution over action names",
            )
        if continuation.text is None or not continuation.text.strip():
            raise SessionError(f"{pointer}/text", "no free text recorded for this r'")
        return continuation.text
    counts = _choice_counts(declaration, continuation, pointer)
    total = sum(counts.values())
    return {a: counts.get(a, 0) / total for a in declaration.action_space.actions}


def _slot_counterfactuals(
    world: SlotWorld, step: SessionStep, pointer: str
) -> tuple[SlotCounterfactual, ...]:
    """Each r' with its Phi(r'): the recorded continuation, else the exact reference's."""
    declaration = world.declaration
    revisions = _revisions(declaration, step, pointer)
    recorded = {
        name: _recorded_phi(declaration, continuation, where)
        for name, (where, continuation) in _continuations(step, revisions, pointer).items()
    }
    out = []
    for name, (k, revision) in revisions.items():
        where = f"{pointer}/counterfactuals/{k}"
        r_prime = SlotReport(check_slots(declaration, revision.r_prime, f"{where}/r_prime"))
        recorded_phi = recorded.get(name)
        phi: dict[str, float] | str | None = recorded_phi
        if phi is None and declaration.exact_reference:
            phi = world.policy(r_prime)
        if phi is None:
            raise SessionError(
                where,
                f"r' {name!r} has no recorded continuation, and world {declaration.world_id} "
                "declares no exact reference agent to give its Phi: record what was done next",
            )
        out.append(
            SlotCounterfactual(
                slot=revision.slot,
                r_prime=r_prime,
                provenance=revision.provenance,
                continuation=phi,
                continuation_source="human" if recorded_phi is not None else "reference_agent",
            )
        )
    return tuple(out)


def _true_value(reader: SessionReader, slot: str, value: str, pointer: str) -> str:
    """A grader-only true value, checked as the slot it is the truth of."""
    try:
        return reader.slot_value(slot, value, "")
    except SessionError as error:
        raise SessionError(pointer, error.message) from None


def _pydantic_error(error: ValidationError, prefix: str = "") -> SessionError:
    first = error.errors()[0]
    pointer = prefix + "".join(f"/{part}" for part in first["loc"])
    return SessionError(pointer, first["msg"])


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    raw = read_input_file(path, missing="session file not found")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", location=str(path)) from None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield number, line


class ImportedSessions(BaseModel):
    """A validated session file: its traces per split and who collected each split."""

    model_config = documented(frozen=True)

    splits: dict[str, list[AnyTrace]]
    """Traces per split, in file order."""
    collected_by: dict[str, tuple[str, ...]]
    """Split -> the collectors named by its sessions, sorted."""


def read_sessions(path: Path, world_id: str = DEFAULT_WORLD_ID) -> ImportedSessions:
    """Every session of a session file as a trace, per split, with the splits' collectors.

    The sessions are read as world `world_id` states them.

    Raises:
        InputError: The first invalid line, as `FILE:LINE#/pointer: why` (nothing is kept);
            a world the import cannot read.
    """
    _check_world(world_id)
    splits: dict[str, list[AnyTrace]] = {}
    collected_by: dict[str, set[str]] = {}
    seen: dict[str, int] = {}
    for number, line in _lines(path):
        record, trace = _session_line(line, f"{path}:{number}", world_id)
        if record.session in seen:
            raise InputError(
                f"session {record.session!r} is also on line {seen[record.session]}",
                location=f"{path}:{number}#/session",
            )
        seen[record.session] = number
        splits.setdefault(record.split, []).append(trace)
        collected_by.setdefault(record.split, set()).add(record.collected_by)
    if not splits:
        raise InputError("the session file holds no session", location=str(path))
    return ImportedSessions(
        splits=splits,
        collected_by={split: tuple(sorted(names)) for split, names in collected_by.items()},
    )


def _check_world(world_id: str) -> None:
    if not isinstance(world_for(world_id), SlotWorld):
        session_reader(world_id)


def _session_line(
    line: str, where: str, world_id: str
) -> tuple[SessionRecord | SlotSessionRecord, AnyTrace]:
    """One line as its session and trace; any failure as `where#/pointer: why`."""
    try:
        data = json.loads(line)
    except ValueError as error:
        raise InputError(f"not JSON ({error})", location=where) from None
    try:
        world = world_for(world_id)
        if isinstance(world, SlotWorld):
            slot_record = SlotSessionRecord.model_validate(data)
            return slot_record, slot_session_trace(slot_record, world)
        record = SessionRecord.model_validate(data)
        return record, session_trace(record, world_id)
    except ValidationError as error:
        failed = _pydantic_error(error)
        raise InputError(failed.message, location=f"{where}#{failed.pointer}") from None
    except SessionError as error:
        raise InputError(error.message, location=f"{where}#{error.pointer}") from None


def import_sessions(
    path: Path, out: Path, world_id: str = DEFAULT_WORLD_ID
) -> tuple[CorpusManifest, dict[str, Any]]:
    """Import a session file of world `world_id` into a new corpus folder `out`.

    Nothing is written on failure. The manifest records the world's id and digest.

    Returns:
        The written manifest, and the eval split's `trb_score_evidence` (the human data the
        "TRB score" guard counts).

    Raises:
        InputError: An invalid line, or `out` already holds files.
        CheckFailed: The corpus contradicts its kind (`check_cap`); nothing is written.
    """
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError("the corpus folder already exists and is not empty", location=str(out))
    sessions = read_sessions(path, world_id)
    staging = out.with_name(f".{out.name}.import-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        manifest = write_corpus(
            staging, sessions.splits, _kind(sessions.splits), encodings={},
            collected_by=sessions.collected_by, world_id=world_id,
        )  # fmt: skip
        if out.exists():
            out.rmdir()  # empty, checked above
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest, trb_score_evidence(sessions.splits.get("eval", []))


def _kind(splits: dict[str, list[AnyTrace]]) -> str:
    """`human_paired` when any r' is a same-session or paired-session value."""
    human = any(
        cf.provenance != "synthetic"
        for traces in splits.values()
        for trace in traces
        for step in trace.steps
        for cf in step.counterfactuals
    )
    return "human_paired" if human else "reference_world"
