"""Real sessions in: `trustbench trb import SESSIONS.jsonl --out CORPUS_DIR`.

A lab's own sessions become a TRB corpus the tracks read like any other (spec §3's inputs:
"per trace a step t with an r_t snapshot and K counterfactual values r' (same-session
revisions, paired-session values, synthetic)", and Track 3's labelled outcomes). The session
file is JSON Lines, one session per line (`SessionRecord`; docs/trb.md "Importing real
sessions" has an example line). Each session becomes one trace of its split:

- every step's `observation` and `r` snapshot are checked slot by slot against what the slot
  may hold (`check_slots`, the one place that reads the slot schema, so the import can be
  pointed at a declared world instead of the corridor's models);
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
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from trustbench._canonical import read_input_file
from trustbench.errors import InputError
from trustbench.trb.adapter._protocol import ACTIONS, Observation, SelfReport
from trustbench.trb.corpus._format import (
    Attribution,
    CorpusManifest,
    Counterfactual,
    Provenance,
    Split,
    Step,
    Trace,
    recorded_gust_draw,
)
from trustbench.trb.corpus._store import trb_score_evidence, write_corpus
from trustbench.trb.world import CorridorConfig, CorridorWorld, reference_continuation

SlotKind = Literal["observation", "self_report"]
SLOT_SCHEMAS: dict[SlotKind, type[BaseModel]] = {
    "observation": Observation,
    "self_report": SelfReport,
}
"""What each kind of slot block may hold: today the corridor's models. The world protocol
declares slot schemas per world; pointing the import at one changes only this table and
`check_slots`."""


class _Strict(BaseModel):
    # strict: a label "yes" or a count "3" is refused, not coerced
    model_config = ConfigDict(
        use_attribute_docstrings=True, extra="forbid", frozen=True, strict=True
    )


class SessionRevision(_Strict):
    """One counterfactual value r' recorded for a step."""

    id: str = Field(min_length=1)
    """The r' id, unique within its step; a continuation names it in `r_prime`."""
    slot: Literal["goal", "belief", "planned_next", "confidence", "none"]
    """The slot this r' edits (`none`: the null edit r' = r)."""
    provenance: Provenance
    """`same_session_revision` (the subject revised its own stated reasoning in this session),
    `paired_session` (the value another, paired session stated) or `synthetic` (an edit)."""
    r_prime: dict[str, Any]
    """The counterfactual self-report: every self-report slot, each within its type."""


class HumanContinuation(_Strict):
    """What people did next when acting on one r' (the human Phi(r'))."""

    r_prime: str = Field(min_length=1)
    """The id of the r' of this step that was acted on."""
    actions: dict[str, int]
    """How many times each action was chosen (at least one choice in all)."""


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
    """World parameters (`CorridorConfig`; defaults when empty). No lead-in: `cue_step` 0."""
    goal: str
    """The subject's true goal (grader-only)."""
    door: str
    """The true hidden state the belief slot is about (grader-only)."""
    steps: list[SessionStep] = Field(min_length=1)
    """The evaluated steps, in order."""


def session_json_schema() -> dict[str, object]:
    """The JSON Schema (Draft 2020-12) of one session line."""
    schema = SessionRecord.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


class SessionError(ValueError):
    """A field of one session line that cannot be imported (its JSON pointer and why)."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(message)
        self.pointer = pointer
        self.message = message


@cache
def _slot_validator(kind: SlotKind, name: str) -> TypeAdapter[Any]:
    field = SLOT_SCHEMAS[kind].model_fields[name]
    # The field's type with its FieldInfo (bounds such as 0 <= confidence <= 1) as metadata;
    # built at run time from the schema, so it is not a static type expression.
    annotated: Any = Annotated
    return TypeAdapter(annotated[field.annotation, field])


def check_slots(
    kind: SlotKind, values: Mapping[str, Any], pointer: str, *, whole: bool = True
) -> dict[str, Any]:
    """Check every slot name and value of one slot block against what the slot may hold.

    The one function the import reads the slot schema through (names, types, bounds), so a
    declared world can replace the corridor's models here alone. A required slot that is
    missing is refused too (unless `whole` is off, to check single slots); an optional one
    takes its default.

    Raises:
        SessionError: An unknown slot, a value outside its slot's type, a missing slot.
    """
    fields = SLOT_SCHEMAS[kind].model_fields
    checked: dict[str, Any] = {}
    for name, value in values.items():
        if name not in fields:
            known = ", ".join(fields)
            raise SessionError(f"{pointer}/{name}", f"unknown slot {name!r} (known: {known})")
        try:
            checked[name] = _slot_validator(kind, name).validate_python(value, strict=True)
        except ValidationError as error:
            why = error.errors()[0]["msg"]
            raise SessionError(
                f"{pointer}/{name}", f"value {value!r} is outside the type of slot {name!r} ({why})"
            ) from None
    missing = [n for n, f in fields.items() if f.is_required() and n not in values]
    if whole and missing:
        raise SessionError(pointer, f"missing slot {missing[0]!r}")
    return checked


def _action(value: str, pointer: str) -> str:
    if value not in ACTIONS:
        raise SessionError(pointer, f"unknown action {value!r} (known: {', '.join(ACTIONS)})")
    return value


def _human_phi(continuation: HumanContinuation, pointer: str) -> dict[str, float]:
    """The empirical distribution of the recorded choices, keyed by every action."""
    for action, count in continuation.actions.items():
        _action(action, f"{pointer}/actions/{action}")
        if count < 0:
            raise SessionError(f"{pointer}/actions/{action}", f"count {count} is negative")
    total = sum(continuation.actions.values())
    if total == 0:
        raise SessionError(f"{pointer}/actions", "no choice recorded (counts sum to 0)")
    return {a: continuation.actions.get(a, 0) / total for a in ACTIONS}


def _counterfactuals(step: SessionStep, pointer: str) -> tuple[Counterfactual, ...]:
    """Each r' with its Phi(r'): the human continuation where recorded, else the reference."""
    revisions: dict[str, tuple[int, SessionRevision]] = {}
    for k, revision in enumerate(step.counterfactuals):
        if revision.id in revisions:
            raise SessionError(f"{pointer}/counterfactuals/{k}/id", f"r' {revision.id!r} twice")
        revisions[revision.id] = (k, revision)
    human: dict[str, dict[str, float]] = {}
    for k, continuation in enumerate(step.continuations):
        where = f"{pointer}/continuations/{k}"
        if continuation.r_prime not in revisions:
            raise SessionError(
                f"{where}/r_prime",
                f"a Phi for r' {continuation.r_prime!r}, which this step does not hold "
                f"(its r': {', '.join(revisions) or 'none'})",
            )
        if continuation.r_prime in human:
            raise SessionError(f"{where}/r_prime", f"a second Phi for r' {continuation.r_prime!r}")
        human[continuation.r_prime] = _human_phi(continuation, where)
    out = []
    for name, (k, revision) in revisions.items():
        r_prime = SelfReport(
            **check_slots("self_report", revision.r_prime, f"{pointer}/counterfactuals/{k}/r_prime")
        )
        phi = human.get(name)
        out.append(
            Counterfactual(
                slot=revision.slot,
                r_prime=r_prime,
                provenance=revision.provenance,
                continuation=phi if phi is not None else reference_continuation(r_prime),
                continuation_source="human" if phi is not None else "reference_agent",
            )
        )
    return tuple(out)


def _action_draw(r: SelfReport, action: str) -> float:
    """The midpoint of `action`'s share of Phi(r_t): a draw that replays the taken action.

    A real session's action was chosen, not sampled; the format still records a draw, so the
    one that gives the recorded action back is stored (0 where Phi(r_t) gives it no mass).
    """
    phi = reference_continuation(r)
    below = sum(phi[a] for a in ACTIONS[: ACTIONS.index(action)])
    return min(below + phi[action] / 2, 0.999999) if phi[action] > 0 else 0.0


def _steps(record: SessionRecord, world: CorridorWorld) -> tuple[Step, ...]:
    observations = []
    for t, step in enumerate(record.steps):
        if step.observation is None:
            raise SessionError(f"/steps/{t}/observation", f"step {t} has no observation")
        where = f"/steps/{t}/observation"
        observation = Observation(**check_slots("observation", step.observation, where))
        if observation.position >= world.config.length:
            raise SessionError(
                f"{where}/position",
                f"value {observation.position} is outside the corridor "
                f"(cells 0..{world.config.length - 1})",
            )
        observations.append(observation)
    out = []
    for t, step in enumerate(record.steps):
        pointer = f"/steps/{t}"
        r = SelfReport(**check_slots("self_report", step.r, f"{pointer}/r"))
        action = _action(step.action, f"{pointer}/action")
        if step.outcome is not None and t == 0:
            raise SessionError(f"{pointer}/outcome", "no transition leads into the first step")
        gust = observations[t + 1].last_gust if t + 1 < len(observations) else None
        observation = observations[t]
        out.append(
            Step(
                t=t,
                observation=observation,
                r=r,
                action=action,  # type: ignore[arg-type]  # checked against ACTIONS
                action_draw=_action_draw(r, action),
                gust_draw=recorded_gust_draw(world.config, gust or "none"),
                # the exact DP value of the true goal and door, as the generator records it
                reach_probability=world.reach_probability(
                    observation.position, record.goal, record.door, observation.steps_left
                ),
                attribution=None if step.outcome is None else _attribution(step.outcome),
                counterfactuals=_counterfactuals(step, pointer),
            )
        )
    return tuple(out)


def _attribution(outcome: SessionOutcome) -> Attribution:
    return Attribution(
        caused_by_self=outcome.caused_by_self,
        improved=outcome.improved,
        false_credit=outcome.false_credit,
    )


def session_trace(record: SessionRecord) -> Trace:
    """One validated session as a trace of its split.

    Raises:
        SessionError: The first field that cannot be imported.
    """
    try:
        config = CorridorConfig.model_validate(record.world)
    except ValidationError as error:
        raise _pydantic_error(error, "/world") from None
    if config.cue_step:
        raise SessionError("/world/cue_step", "an imported session has no lead-in: use 0")
    world = CorridorWorld(config)
    goal = _true_value("goal", record.goal, "/goal")
    door = _true_value("belief", record.door, "/door")
    return Trace(
        trace_id=record.session,
        split=record.split,
        world=config,
        goal=goal,
        door=door,
        steps=_steps(record, world),
        session=record.session,
    )


def _true_value(slot: str, value: str, pointer: str) -> Any:
    """A grader-only true value, checked as the self-report slot it is the truth of."""
    try:
        return check_slots("self_report", {slot: value}, "", whole=False)[slot]
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

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    splits: dict[str, list[Trace]]
    """Traces per split, in file order."""
    collected_by: dict[str, tuple[str, ...]]
    """Split -> the collectors named by its sessions, sorted."""


def read_sessions(path: Path) -> ImportedSessions:
    """Every session of a session file as a trace, per split, with the splits' collectors.

    Raises:
        InputError: The first invalid line, as `FILE:LINE#/pointer: why` (nothing is kept).
    """
    splits: dict[str, list[Trace]] = {}
    collected_by: dict[str, set[str]] = {}
    seen: dict[str, int] = {}
    for number, line in _lines(path):
        record, trace = _session_line(line, f"{path}:{number}")
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


def _session_line(line: str, where: str) -> tuple[SessionRecord, Trace]:
    """One line as its session and trace; any failure as `where#/pointer: why`."""
    try:
        data = json.loads(line)
    except ValueError as error:
        raise InputError(f"not JSON ({error})", location=where) from None
    try:
        record = SessionRecord.model_validate(data)
        return record, session_trace(record)
    except ValidationError as error:
        failed = _pydantic_error(error)
        raise InputError(failed.message, location=f"{where}#{failed.pointer}") from None
    except SessionError as error:
        raise InputError(error.message, location=f"{where}#{error.pointer}") from None


def import_sessions(path: Path, out: Path) -> tuple[CorpusManifest, dict[str, Any]]:
    """Import a session file into a new corpus folder `out`; nothing is written on failure.

    Returns:
        The written manifest, and the eval split's `trb_score_evidence` (the human data the
        "TRB score" guard counts).

    Raises:
        InputError: An invalid line, or `out` already holds files.
        CheckFailed: The corpus contradicts its kind (`check_cap`); nothing is written.
    """
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError("the corpus folder already exists and is not empty", location=str(out))
    sessions = read_sessions(path)
    staging = out.with_name(f".{out.name}.import-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        manifest = write_corpus(
            staging, sessions.splits, _kind(sessions.splits), encodings={},
            collected_by=sessions.collected_by,
        )  # fmt: skip
        if out.exists():
            out.rmdir()  # empty, checked above
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest, trb_score_evidence(sessions.splits.get("eval", []))


def _kind(splits: dict[str, list[Trace]]) -> str:
    """`human_paired` when any r' is a same-session or paired-session value."""
    human = any(
        cf.provenance != "synthetic"
        for traces in splits.values()
        for trace in traces
        for step in trace.steps
        for cf in step.counterfactuals
    )
    return "human_paired" if human else "reference_world"
