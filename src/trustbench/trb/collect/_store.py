"""Collection sessions kept in the hash-chained ledger: shown, answered, attributed, withdrawn.

The serving app is the ledger's only writer (it holds the folder's `RunLock`). Nothing lives
only in memory: every state change is one committed event, so a killed server loses nothing
already answered and a restarted one rebuilds each session from the ledger and resumes at the
next unanswered item.

Events written (all carry `participant` and, but for withdrawal, `item_id`):

- `collect_shown` `{nonce, at_epoch}`: the first time an item is displayed (its nonce is echoed
  by the form, so a stale form from an earlier item is refused);
- `collect_answer` `{action, note, time_on_task_s, time_limit_s, overran_time_limit,
  model_continuation_shown, outcome}`: the continuation chosen under r'; for a Track 3 item
  `outcome` holds the protocol's exogenous gust, the resulting cell and the grader-only label
  (`caused_by_self` by the but-for rule, `improved`, `false_credit`); only the cell is shown.
  In a world with its own slots (`SlotWorld`, no dynamics to apply a move to) `outcome` holds
  the recorded next step's grader-only label (`caused_by_self`, null where none is recorded);
- `collect_attribution` `{answer, time_s}`: the participant's own attribution of that outcome
  (`self` or `exogenous`; in a slot world the value of its declared attribution slot, a
  number within the slot's bounds), scored against the label in the export report;
- `collect_rejected` `{reason}`: a refused form (the count is reported);
- `collect_withdrawn` `{answered}`: the participant withdrew; export drops the whole session.

Time on task runs from the first display to the answer; a server stopped in between counts.
"""

from __future__ import annotations

import json
import random
import secrets
import time
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from trustbench._canonical import read_input_file
from trustbench._docstrings import documented
from trustbench.core import Ledger, LedgerContents
from trustbench.errors import InputError
from trustbench.trb.adapter._protocol import ACTIONS, Observation
from trustbench.trb.corpus._format import (
    HELD_OUT,
    SPLITS,
    AnyTrace,
    Attribution,
    Counterfactual,
    HumanCollection,
    SlotStep,
    SlotTrace,
    Split,
    Step,
    Trace,
    canonical_sha256,
    recorded_gust_draw,
)
from trustbench.trb.world import (
    CategoricalSlot,
    CorridorWorld,
    NumberSlot,
    SlotWorld,
    TextSlot,
    reference_continuation,
    sample_action,
    slot_value_problem,
    world_for,
)

# ------------------------------------------------------------------------------------------------
# The collection protocol: a TOML spec frozen, like any experiment, before anyone answers.
#
# A protocol names the source corpus, which of its traces, steps and r' kinds are served, who
# takes part (pseudonymous ids, each assigned to one split: a session's answers all land in its
# split, never item by item), the qualification every participant must hold, the time limit per
# item, whether the reference agent's own continuation Phi(r') is shown, and how Track 3 outcome
# items introduce an exogenous change. `freeze_protocol` writes `protocol.json`: the protocol,
# the served traces themselves (so a served session does not depend on the source folder still
# existing) and the SHA-256 that pins both; the ledger of the sessions is keyed to that hash.

PROTOCOL_FILE = "protocol.json"
"""The frozen protocol inside a collection folder."""
FORMAT = "trb-collection/1"
"""Format tag of `protocol.json`."""


class _Strict(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class SourceCorpus(_Strict):
    """Where the served traces come from: a corpus folder written in the TRB corpus format."""

    path: str
    """Corpus folder, relative to the protocol file (e.g. one `trustbench trb corpus` wrote)."""


class ItemSelection(_Strict):
    """Which traces, steps and counterfactual kinds become items."""

    max_traces: int = Field(default=2, ge=1)
    """Traces served per split (the first N by trace id of the source split)."""
    steps: tuple[int, ...] = ()
    """Evaluated-step offsets served (0 = the cue step); empty = every evaluated step."""
    r_prime_slots: tuple[str, ...] = ("goal", "belief", "planned_next", "confidence")
    """Which stored r' kinds (the slot each edits) are served: slots the source corpus's
    world lets Track 1 edit (a world with its own slots names its own `editable_slots`)."""
    track3: bool = True
    """Items whose step is not the trace's last also ask for the outcome's cause (Track 3)."""
    exogenous_change_probability: float = Field(default=0.5, ge=0.0, le=1.0)
    """Per Track 3 item, the chance that the protocol replaces the participant's move by a
    gust (left or right, equally likely): the exogenous change."""
    seed: int = 0
    """Seed of the per-participant item order and of the exogenous draws."""


class Participant(_Strict):
    """One pseudonymous participant; their whole session belongs to one split."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    """Pseudonym (never a name or an e-mail address)."""
    split: Split
    """The split every answer of this session is exported into (items come from it)."""
    qualifications: tuple[str, ...] = ()
    """Qualifications the study lead recorded for this participant."""


class SessionRules(_Strict):
    """Per-session rules of the protocol."""

    participants_per_item: int = Field(default=2, ge=1)
    """Answers wanted per item; export reports items below it."""
    time_limit_s: float = Field(default=120.0, gt=0)
    """Suggested time per item (not enforced; overruns are recorded and reported)."""
    show_model_continuation: bool = False
    """Show the reference agent's own continuation Phi(r') beside the question."""
    required_qualifications: tuple[str, ...] = ()
    """Every participant must hold all of these (checked at freeze)."""


class CollectionProtocol(_Strict):
    """A paired counterfactual collection protocol (the TOML file's top level)."""

    description: str = ""
    """What this collection is for (shown in the export report)."""
    corpus: SourceCorpus
    """The source corpus."""
    items: ItemSelection = ItemSelection()
    """Which items are served."""
    session: SessionRules = SessionRules()
    """Per-session rules."""
    participants: tuple[Participant, ...] = Field(min_length=1)
    """Everyone invited, each with their split."""

    @model_validator(mode="after")
    def _unique_and_qualified(self) -> CollectionProtocol:
        ids = [p.id for p in self.participants]
        if len(set(ids)) != len(ids):
            raise ValueError("participant ids must be unique")
        for p in self.participants:
            missing = set(self.session.required_qualifications) - set(p.qualifications)
            if missing:
                raise ValueError(f"participant {p.id} lacks qualification(s) {sorted(missing)}")
        return self


class Item(_Strict):
    """One served question: a trace step t and one stored counterfactual r' of it."""

    item_id: str
    """`<trace_id>/t<t>/k<k>`."""
    trace_id: str
    """The trace."""
    split: Split
    """Its split (the split of every session that answers it)."""
    t: int
    """The evaluated step."""
    k: int
    """Index of the counterfactual in the step's stored list."""
    track3: bool
    """Whether the outcome's cause is recorded after the answer."""


class FrozenProtocol(_Strict):
    """`protocol.json`: the protocol, the served traces, the items and the pinning hash."""

    format: Literal["trb-collection/1"]
    """Format tag."""
    protocol: CollectionProtocol
    """The protocol as validated."""
    source_corpus_sha256: str
    """`corpus_sha256` of the source corpus at freeze."""
    traces: tuple[AnyTrace, ...]
    """The served traces, copied from the source corpus (`SlotTrace` in a slot world)."""
    items: tuple[Item, ...]
    """Every item, in protocol order."""
    protocol_sha256: str
    """SHA-256 of the canonical JSON of everything above (the ledger is keyed to it)."""

    def trace(self, trace_id: str) -> AnyTrace:
        """The served trace with this id."""
        return next(t for t in self.traces if t.trace_id == trace_id)

    def corridor_trace(self, trace_id: str) -> Trace:
        """The served trace with this id, in a world with the corridor's dynamics."""
        trace = self.trace(trace_id)
        assert isinstance(trace, Trace), f"{trace_id} is a slot-world trace"
        return trace

    @property
    def slot_world(self) -> SlotWorld | None:
        """The world with its own slots the served traces are recorded in (None: corridor)."""
        first = self.traces[0]
        if not isinstance(first, SlotTrace):
            return None
        world = world_for(first.world_id)
        assert isinstance(world, SlotWorld)
        return world

    def actions(self) -> tuple[str, ...]:
        """The actions a participant chooses from: the served world's declared K."""
        world = self.slot_world
        return ACTIONS if world is None else world.declaration.action_space.actions

    def items_for(self, split: str) -> list[Item]:
        """The items a session of this split answers."""
        return [item for item in self.items if item.split == split]


def load_protocol(path: Path) -> CollectionProtocol:
    """Parse and validate a protocol TOML file.

    Raises:
        InputError: a missing or non-regular file, unreadable TOML or an invalid field (named
            by its pointer).
    """
    raw = read_input_file(path)  # a FIFO or a device is refused, never read
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError("protocol file is not UTF-8 text", location=str(path)) from None
    except (tomllib.TOMLDecodeError, RecursionError) as error:
        raise InputError(f"invalid TOML: {error}", location=str(path)) from None
    try:
        return CollectionProtocol.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        pointer = "/".join(str(p) for p in first["loc"])
        raise InputError(first["msg"], location=f"{path}#/{pointer}") from None


def _asks_attribution(trace: AnyTrace) -> bool:
    """Whether the trace's world has a Track 3 question (a slot world may declare none)."""
    if isinstance(trace, Trace):
        return True
    return world_for(trace.world_id).declaration.attribution_slot is not None


def _items(protocol: CollectionProtocol, traces: list[AnyTrace]) -> list[Item]:
    chosen = protocol.items
    out: list[Item] = []
    for trace in traces:
        first, last = trace.steps[0].t, trace.steps[-1].t
        track3 = chosen.track3 and _asks_attribution(trace)
        offsets = chosen.steps or tuple(range(len(trace.steps)))
        for offset in offsets:
            if offset >= len(trace.steps):
                continue
            step = trace.steps[offset]
            for k, cf in enumerate(step.counterfactuals):
                if cf.slot not in chosen.r_prime_slots:
                    continue
                out.append(
                    Item(
                        item_id=f"{trace.trace_id}/t{step.t}/k{k}",
                        trace_id=trace.trace_id,
                        split=trace.split,
                        t=step.t,
                        k=k,
                        track3=track3 and step.t < last and step.t >= first,
                    )
                )
    return out


def build_frozen(protocol: CollectionProtocol, base_dir: Path) -> FrozenProtocol:
    """Resolve a protocol against its source corpus into the frozen form.

    Raises:
        InputError: a participant's split is absent from the source corpus, or it yields no
            item.
    """
    from trustbench.trb.corpus._store import read_corpus_of_any_world

    manifest, splits = read_corpus_of_any_world((base_dir / protocol.corpus.path).resolve())
    _check_served_slots(protocol, manifest.world_id)
    wanted = sorted({p.split for p in protocol.participants}, key=(*SPLITS, *HELD_OUT).index)
    traces: list[AnyTrace] = []
    for split in wanted:
        found = sorted(splits.get(split, []), key=lambda t: t.trace_id)
        if not found:
            raise InputError(
                f"the source corpus has no {split!r} traces for the participants assigned to it",
                location="participants",
            )
        traces += found[: protocol.items.max_traces]
    items = _items(protocol, traces)
    for split in wanted:
        if not any(item.split == split for item in items):
            raise InputError(f"no item selected in split {split!r}", location="items")
    body = {
        "format": FORMAT,
        "protocol": protocol.model_dump(mode="json"),
        "source_corpus_sha256": manifest.corpus_sha256,
        "traces": [t.model_dump(mode="json") for t in traces],
        "items": [i.model_dump(mode="json") for i in items],
    }
    return FrozenProtocol.model_validate({**body, "protocol_sha256": canonical_sha256(body)})


def _check_served_slots(protocol: CollectionProtocol, world_id: str) -> None:
    """Every r' kind served is an editable slot of a world whose K actions a person can choose.

    Raises:
        InputError: naming `items/r_prime_slots`, the slot and the world's editable slots; or
            `corpus/path` for a world with open-ended actions.
    """
    declaration = world_for(world_id).declaration
    if declaration.action_space.kind == "open_ended":
        raise InputError(
            f"world {world_id} declares open-ended actions; the collection app asks a "
            "participant to choose one of a world's K actions and does not serve free-text "
            "replies yet (collect them outside and import them with trb import)",
            location="corpus/path",
        )
    editable = declaration.editable_slots
    unknown = [slot for slot in protocol.items.r_prime_slots if slot not in editable]
    if unknown:
        raise InputError(
            f"{unknown[0]!r} is not an editable slot of world {world_id} "
            f"(editable: {', '.join(editable)})",
            location="items/r_prime_slots",
        )


def freeze_protocol(path: Path, out: Path) -> FrozenProtocol:
    """Freeze the protocol file `path` into the collection folder `out` (a new folder).

    Raises:
        InputError: `out` already holds a frozen protocol, or the protocol is invalid.
    """
    frozen = build_frozen(load_protocol(path), path.parent)
    if (out / PROTOCOL_FILE).exists():
        raise InputError("already frozen here; freeze into a new folder", location=str(out))
    out.mkdir(parents=True, exist_ok=True)
    (out / PROTOCOL_FILE).write_text(
        json.dumps(frozen.model_dump(mode="json"), indent=1, sort_keys=True), encoding="utf-8"
    )
    return frozen


def read_frozen(folder: Path) -> FrozenProtocol:
    """Read `protocol.json` and check its hash (a hand-edited protocol is refused).

    Raises:
        InputError: missing or invalid file, or its traces' world (one with its own slots) is
            not registered in this process.
        CheckFailed: the recorded hash does not match the content.
    """
    from trustbench.errors import CheckFailed

    path = folder / PROTOCOL_FILE
    if not path.exists():
        raise InputError(
            "not a collection folder (no protocol.json); run `trustbench trb collect freeze`",
            location=str(folder),
        )
    raw = read_input_file(path)  # a FIFO or a device in its place is refused, never read
    try:
        frozen = FrozenProtocol.model_validate_json(raw)
    except ValidationError as error:
        first = error.errors()[0]
        pointer = "/".join(map(str, first["loc"]))
        raise InputError(first["msg"], location=f"{path}#/{pointer}") from None
    body = frozen.model_dump(mode="json", exclude={"protocol_sha256"})
    if canonical_sha256(body) != frozen.protocol_sha256:
        raise CheckFailed("protocol.json differs from its recorded hash", location=str(path))
    try:
        frozen.slot_world  # noqa: B018  # a slot world's pages and export read its declaration
    except InputError as error:
        raise InputError(error.message, location=f"{path}#/traces/0/world_id") from None
    return frozen


class SlotAnswerError(ValueError):
    """A posted slot value outside its declared type (the message names the slot)."""


def slot_answer(name: str, spec: CategoricalSlot | NumberSlot | TextSlot, raw: str) -> str | float:
    """A slot's posted form value read as its declared type, checked server-side.

    A browser's `min`/`max` or choice list is advice only: the value is checked here against
    the declaration (`slot_value_problem`, the words `trb import` uses), so a value outside
    the slot's values or bounds is refused, naming the slot, and nothing is recorded.

    Raises:
        SlotAnswerError: the value is empty, not a number, or outside the slot's type.
    """
    text = raw.strip()
    if not text:
        raise SlotAnswerError(f"{name}: give a value")
    value: str | float = text
    if isinstance(spec, NumberSlot):
        try:
            value = float(text)
        except ValueError:
            raise SlotAnswerError(f"{name}: {text!r} is not a number") from None
    problem = slot_value_problem(spec, value)
    if problem is not None:
        raise SlotAnswerError(f"{name}: {problem}")
    return value


def slot_outcome(frozen: FrozenProtocol, item: Item) -> dict[str, Any]:
    """A slot-world Track 3 item's outcome: the recorded next step's grader-only label.

    A slot world declares no dynamics, so the participant's move changes nothing: the outcome
    shown is the next step as recorded, and its label (null where the trace has none) is what
    the participant's attribution is scored against.
    """
    trace = frozen.trace(item.trace_id)
    after = next(s for s in trace.steps if s.t == item.t + 1)
    label = None if after.attribution is None else after.attribution.caused_by_self
    return {"caused_by_self": label, "false_credit": False}


_MOVE = {"left": -1, "stay": 0, "right": 1}
ATTRIBUTIONS = ("self", "exogenous")
"""The two answers a Track 3 outcome question allows."""


def item_order(frozen: FrozenProtocol, participant: Participant) -> tuple[Item, ...]:
    """A participant's items of their split in a seeded order (seed and pseudonym)."""
    items = frozen.items_for(participant.split)
    random.Random(f"{frozen.protocol.items.seed}:{participant.id}").shuffle(items)
    return tuple(items)


def exogenous_gust(frozen: FrozenProtocol, participant: str, item: Item) -> str:
    """The protocol's exogenous change for this participant and item: left, right or none."""
    rng = random.Random(f"{frozen.protocol.items.seed}:{participant}:{item.item_id}:exogenous")
    if rng.random() >= frozen.protocol.items.exogenous_change_probability:
        return "none"
    return "left" if rng.random() < 0.5 else "right"


def outcome_of(frozen: FrozenProtocol, participant: str, item: Item, action: str) -> dict[str, Any]:
    """The transition after the participant's move, with its grader-only labels."""
    trace = frozen.corridor_trace(item.trace_id)
    step = next(s for s in trace.steps if s.t == item.t)
    world = CorridorWorld(trace.world)
    cell, gust = step.observation.position, exogenous_gust(frozen, participant, item)
    new = world.next_cell(cell, action, gust, trace.door)
    caused = world.caused_by_self(cell, action, gust, trace.door)
    target = world.target(trace.goal)  # as the corpus labels it: the trace's true goal
    improved = abs(new - target) < abs(cell - target)
    looks_self = action != "stay" and new - cell == _MOVE[action]
    return {
        "gust": gust,
        "cell_before": cell,
        "cell_after": new,
        "caused_by_self": caused,
        "improved": improved,
        "false_credit": looks_self and improved and not caused,
    }


@dataclass
class Session:
    """One participant's session state, rebuilt from the ledger."""

    participant: Participant
    """Who answers."""
    order: tuple[Item, ...]
    """Their items in order."""
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Item id -> the `collect_answer` data."""
    attributions: dict[str, str] = field(default_factory=dict)
    """Item id -> `self` / `exogenous`."""
    shown: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Item id -> the `collect_shown` data (nonce, epoch)."""
    withdrawn: bool = False
    """True once the participant withdrew."""
    rejected: int = 0
    """Forms refused so far."""

    def complete(self, item: Item) -> bool:
        """Answered, and attributed where the item asks for it."""
        return item.item_id in self.answers and (
            not item.track3 or item.item_id in self.attributions
        )

    @property
    def current(self) -> Item | None:
        """The next item not yet complete (None when finished)."""
        return next((i for i in self.order if not self.complete(i)), None)

    @property
    def position(self) -> int:
        """How many items are complete."""
        return sum(self.complete(i) for i in self.order)


def rebuild_sessions(frozen: FrozenProtocol, contents: LedgerContents) -> dict[str, Session]:
    """Every participant's session as the ledger's events leave it."""
    sessions = {p.id: Session(p, item_order(frozen, p)) for p in frozen.protocol.participants}
    for event in contents.events:
        replay(sessions, event["kind"], event["data"])
    return sessions


def session_id(frozen: FrozenProtocol, participant: str) -> str:
    """A session's id: the pseudonym and the protocol it answered (one session each)."""
    return f"{participant}@{frozen.protocol_sha256[:12]}"


def replay(sessions: dict[str, Session], kind: str, data: Any) -> None:
    """Apply one ledger event to the sessions (events of other kinds are ignored)."""
    if not isinstance(data, dict) or data.get("participant") not in sessions:
        return
    session = sessions[data["participant"]]
    if kind == "collect_shown":
        session.shown.setdefault(data["item_id"], data)
    elif kind == "collect_answer":
        session.answers[data["item_id"]] = data
    elif kind == "collect_attribution":
        session.attributions[data["item_id"]] = data["answer"]
    elif kind == "collect_rejected":
        session.rejected += 1
    elif kind == "collect_withdrawn":
        session.withdrawn = True


class CollectionStore:
    """Every participant's session, persisted through the ledger."""

    def __init__(self, ledger: Ledger, frozen: FrozenProtocol, contents: LedgerContents) -> None:
        self._ledger = ledger
        self.frozen = frozen
        self.sessions = rebuild_sessions(frozen, contents)

    def _replay(self, kind: str, data: Any) -> None:
        replay(self.sessions, kind, data)

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        self._ledger.event(kind, data)
        self._ledger.anchor(force=True)  # human pace: anchor every row
        self._replay(kind, data)

    def open_item(self, participant: str) -> tuple[Item, dict[str, Any]] | None:
        """The participant's current item, its display recorded on first view."""
        session = self.sessions[participant]
        item = session.current
        if item is None or session.withdrawn:
            return None
        if item.item_id not in session.shown:
            self._event(
                "collect_shown",
                {
                    "participant": participant,
                    "item_id": item.item_id,
                    "nonce": secrets.token_hex(8),
                    "at_epoch": time.time(),
                },
            )
        return item, session.shown[item.item_id]

    def _refuse(self, participant: str, item: Item | None, reason: str) -> str:
        self._event(
            "collect_rejected",
            {"participant": participant, "item_id": item.item_id if item else None,
             "reason": reason},
        )  # fmt: skip
        return reason

    def _accepted(
        self,
        participant: str,
        form: dict[str, str],
        problem: Callable[[Session, Item], str | None],
    ) -> tuple[Session, Item] | str:
        """The session and open item a posted form is for, or why the form is refused.

        With no item open the reason is only returned; a form for an item no longer open, or
        one `problem` finds fault with, is also logged (`collect_rejected`).
        """
        session = self.sessions[participant]
        item = session.current
        if item is None or session.withdrawn:
            return "no item is open in this session"
        shown = session.shown.get(item.item_id)
        if shown is None or form.get("nonce") != shown["nonce"]:
            reason = "this form belongs to an item that is no longer open"
        else:
            reason = problem(session, item)
        if reason is not None:
            return self._refuse(participant, item, reason)
        return session, item

    def answer(self, participant: str, form: dict[str, str]) -> str | None:
        """Record the continuation chosen for the open item; the refusal reason otherwise."""
        action = form.get("action", "")
        actions = self.frozen.actions()
        accepted = self._accepted(
            participant,
            form,
            lambda session, item: (
                "this item is already answered"
                if item.item_id in session.answers
                else f"choose one action ({', '.join(actions)})"
                if action not in actions
                else None
            ),
        )
        if isinstance(accepted, str):
            return accepted
        session, item = accepted
        now = time.time()
        on_task = now - session.shown[item.item_id]["at_epoch"]
        rules = self.frozen.protocol.session
        outcome = self._outcome(participant, item, action) if item.track3 else None
        self._event(
            "collect_answer",
            {
                "participant": participant,
                "item_id": item.item_id,
                "split": item.split,
                "action": action,
                "note": form.get("note", "")[:2000],
                "at_epoch": now,
                "time_on_task_s": on_task,
                "time_limit_s": rules.time_limit_s,
                "overran_time_limit": on_task > rules.time_limit_s,
                "model_continuation_shown": rules.show_model_continuation,
                "outcome": outcome,
            },
        )
        return None

    def _outcome(self, participant: str, item: Item, action: str) -> dict[str, Any]:
        """A Track 3 item's outcome: the corridor's transition, or a slot world's record."""
        if self.frozen.slot_world is None:
            return outcome_of(self.frozen, participant, item, action)
        return slot_outcome(self.frozen, item)

    def _attribution_answer(self, form: dict[str, str]) -> str | float:
        """The posted attribution: `self` / `exogenous`, or the slot world's attribution slot.

        Raises:
            SlotAnswerError: the answer is missing or outside its choices or its slot's type.
        """
        world = self.frozen.slot_world
        if world is None:
            cause = form.get("cause", "")
            if cause not in ATTRIBUTIONS:
                raise SlotAnswerError("choose what caused the outcome")
            return cause
        slot = world.declaration.attribution_slot
        assert slot is not None  # items of a world without one ask no Track 3 question
        value = slot_answer(slot, world.declaration.slots[slot], form.get(slot, ""))
        assert isinstance(value, float)  # the attribution slot is declared a number
        return value

    def attribute(self, participant: str, form: dict[str, str]) -> str | None:
        """Record the participant's attribution of the open item's outcome."""
        answer: str | float = ""
        problem: str | None = None
        try:
            answer = self._attribution_answer(form)
        except SlotAnswerError as error:
            problem = str(error)
        accepted = self._accepted(
            participant,
            form,
            lambda session, item: (
                "answer the item before its outcome"
                if item.item_id not in session.answers
                else problem
            ),
        )
        if isinstance(accepted, str):
            return accepted
        session, item = accepted
        now = time.time()
        self._event(
            "collect_attribution",
            {
                "participant": participant,
                "item_id": item.item_id,
                "answer": answer,
                "at_epoch": now,
                "time_s": now - session.answers[item.item_id]["at_epoch"],
            },
        )
        return None

    def withdraw(self, participant: str) -> None:
        """Record the participant's withdrawal (export then uses none of their answers)."""
        session = self.sessions[participant]
        if not session.withdrawn:
            self._event(
                "collect_withdrawn",
                {"participant": participant, "answered": len(session.answers),
                 "at_epoch": time.time()},
            )  # fmt: skip


# ------------------------------------------------------------------------------------------------
# Human sessions as corpus traces: Phi(r') entries and the Track 3 outcome traces.
#
# `with_human_phi` turns a served trace into its exported form: at a served step every r' that
# received answers carries the human Phi(r') (the empirical distribution of the participants'
# chosen actions, `paired_session`, `human`, with its `HumanCollection` provenance); r' values of
# the step that were not answered keep their synthetic reference continuation; steps the protocol
# did not serve keep no counterfactual (their synthetic edits would only inflate the synthetic
# share). `synthetic_only` is the same trace with every served step's synthetic continuations:
# the synthetic-only figure beside the human one.
#
# `outcome_trace` is a Track 3 item as a trace: the source trace up to step t, where the
# participant's move and the protocol's exogenous change replace the recorded action and gust,
# then step t+1 with the resulting observation and its but-for `Attribution` label; its
# `session` names the paired session (Track 3 reports it apart from the reference traces). Its
# earlier steps carry neither counterfactuals nor labels (the source trace already scores them), and
# its last step's action is the reference agent's under a seeded draw (never scored by Tracks 1/3).
# The gust is stored as a draw inside the band `CorridorWorld.gust_of` maps to it.

Answer = tuple[str, str, str]
"""(participant, session id, action)."""


def empirical(actions: list[str], world_actions: tuple[str, ...] = ACTIONS) -> dict[str, float]:
    """The distribution of the chosen actions, keyed by every action of the world."""
    counts = Counter(actions)
    return {a: counts[a] / len(actions) for a in world_actions}


def _human_cf(cf: Counterfactual, answers: list[Answer], protocol_sha: str) -> Counterfactual:
    return Counterfactual(
        slot=cf.slot,
        r_prime=cf.r_prime,
        provenance="paired_session",
        continuation=empirical([a for _, _, a in answers]),
        continuation_source="human",
        collected=HumanCollection(
            protocol_sha256=protocol_sha,
            sessions=tuple(sorted({s for _, s, _ in answers})),
            participants=tuple(sorted({p for p, _, _ in answers})),
            answers=len(answers),
            r_prime_origin=cf.provenance,
        ),
    )


def with_human_phi(
    trace: Trace, frozen: FrozenProtocol, answers: dict[str, list[Answer]], *, human: bool
) -> Trace:
    """The exported trace: human Phi(r') where answered (`human=True`), else synthetic only."""
    served = {(i.t, i.k): i.item_id for i in frozen.items if i.trace_id == trace.trace_id}
    served_steps = {t for t, _ in served}
    steps = []
    for step in trace.steps:
        cfs: tuple[Counterfactual, ...] = ()
        if step.t in served_steps:
            out = []
            for k, cf in enumerate(step.counterfactuals):
                got = answers.get(served.get((step.t, k), ""), [])
                out.append(_human_cf(cf, got, frozen.protocol_sha256) if human and got else cf)
            cfs = tuple(out)
        steps.append(step.model_copy(update={"counterfactuals": cfs}))
    return trace.model_copy(update={"steps": tuple(steps)})


def outcome_trace(
    frozen: FrozenProtocol, item: Item, participant: str, answer: dict[str, Any]
) -> Trace:
    """A Track 3 item answered by `participant` as a trace ending at the labelled step t+1."""
    trace = frozen.corridor_trace(item.trace_id)
    world = CorridorWorld(trace.world)
    outcome = answer["outcome"]
    gust, action = outcome["gust"], answer["action"]
    assert world.gust_of(recorded_gust_draw(world.config, gust)) == gust
    steps: list[Step] = []
    for step in trace.steps:
        if step.t > item.t:
            break
        update: dict[str, Any] = {"counterfactuals": (), "attribution": None}
        if step.t == item.t:
            update |= {"action": action, "gust_draw": recorded_gust_draw(world.config, gust)}
        steps.append(step.model_copy(update=update))
    last = steps[-1].observation
    observation = Observation(
        position=outcome["cell_after"],
        steps_left=last.steps_left - 1,
        last_gust=gust,  # type: ignore[arg-type]
        last_action=action,  # type: ignore[arg-type]
    )
    label = bool(outcome["caused_by_self"])
    r = world.coherent_report(
        observation.position, trace.goal, trace.door, observation.steps_left, float(label)
    )
    seed = f"{frozen.protocol.items.seed}:{participant}:{item.item_id}:next"
    draws = random.Random(seed)
    action_draw, gust_draw = draws.random(), draws.random()
    target = world.target(trace.goal)
    before = steps[-1].observation.position
    improved = abs(observation.position - target) < abs(before - target)
    looks_self = action != "stay" and observation.position - before == {"left": -1, "right": 1}.get(
        action, 0
    )
    steps.append(
        Step(
            t=item.t + 1,
            observation=observation,
            r=r,
            action=sample_action(reference_continuation(r), action_draw),
            action_draw=action_draw,
            gust_draw=gust_draw,
            reach_probability=r.confidence,
            attribution=Attribution(
                caused_by_self=label,
                improved=improved,
                false_credit=looks_self and improved and not label,
            ),
            counterfactuals=(),
        )
    )
    safe = item.item_id.replace("/", "-")
    return trace.model_copy(
        update={
            "trace_id": f"{trace.trace_id}~{participant}~{safe}",
            "steps": tuple(steps),
            "session": session_id(frozen, participant),
        }
    )


# ------------------------------------------------------------------------------------------------
# A slot world's collected answers as session lines (`trb import --world ID`).
#
# A world with its own slots has no dynamics to derive an outcome trace from, and its corpus is
# written by the import, so its export is the import's own input: one session line per served
# trace (`slot_session_line`), its steps as recorded, and at a served step each answered r' with
# the participants' choices as its recorded continuation (`provenance` `paired_session`, as the
# corridor's export marks an answered r'). An r' of a served step that no one answered keeps
# its Phi only where the world has an exact reference agent (the import gives it `policy(r')`);
# otherwise it is left out, since the import refuses an r' without a recorded continuation.
# Steps the protocol did not serve carry no r'.


def _slot_step_line(
    step: SlotStep, served: dict[int, str], answers: dict[str, list[Answer]], exact: bool
) -> dict[str, Any]:
    """One step of a session line: as recorded, with the answered r' and their choices."""
    line: dict[str, Any] = {
        "observation": step.observation,
        "r": step.r.root,
        "action": step.action,
    }
    if step.attribution is not None:
        line["outcome"] = step.attribution.model_dump(mode="json")
    revisions, continuations = [], []
    for k, cf in enumerate(step.counterfactuals):
        got = answers.get(served.get(k, ""), [])
        if not got and not exact:
            continue
        revisions.append(
            {"id": f"k{k}", "slot": cf.slot, "r_prime": cf.r_prime.root,
             "provenance": "paired_session" if got else cf.provenance}
        )  # fmt: skip
        if got:
            continuations.append(
                {"r_prime": f"k{k}", "actions": dict(Counter(action for _, _, action in got))}
            )
    if served:
        line |= {"counterfactuals": revisions, "continuations": continuations}
    return line


def slot_session_line(
    trace: SlotTrace, frozen: FrozenProtocol, answers: dict[str, list[Answer]]
) -> dict[str, Any]:
    """A served slot-world trace with its collected continuations, as one session line."""
    exact = world_for(trace.world_id).declaration.exact_reference
    steps = []
    for step in trace.steps:
        served = {i.k: i.item_id for i in frozen.items
                  if i.trace_id == trace.trace_id and i.t == step.t}  # fmt: skip
        steps.append(_slot_step_line(step, served, answers, exact))
    return {
        "session": trace.trace_id,
        "split": trace.split,
        "collected_by": f"trustbench trb collect, protocol {frozen.protocol_sha256[:12]}",
        "steps": steps,
    }
