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
  (`caused_by_self` by the but-for rule, `improved`, `false_credit`); only the cell is shown;
- `collect_attribution` `{answer, time_s}`: the participant's own attribution of that outcome
  (`self` or `exogenous`), scored against the label in the export report;
- `collect_rejected` `{reason}`: a refused form (the count is reported);
- `collect_withdrawn` `{answered}`: the participant withdrew; export drops the whole session.

Time on task runs from the first display to the answer; a server stopped in between counts.
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trustbench.core import Ledger, LedgerContents
from trustbench.trb.adapter._schema import ACTIONS
from trustbench.trb.collect._protocol import FrozenProtocol, Item, Participant
from trustbench.trb.world import CorridorWorld

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
    trace = frozen.trace(item.trace_id)
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
        accepted = self._accepted(
            participant,
            form,
            lambda session, item: (
                "this item is already answered"
                if item.item_id in session.answers
                else f"choose one action ({', '.join(ACTIONS)})"
                if action not in ACTIONS
                else None
            ),
        )
        if isinstance(accepted, str):
            return accepted
        session, item = accepted
        now = time.time()
        on_task = now - session.shown[item.item_id]["at_epoch"]
        rules = self.frozen.protocol.session
        outcome = outcome_of(self.frozen, participant, item, action) if item.track3 else None
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

    def attribute(self, participant: str, form: dict[str, str]) -> str | None:
        """Record the participant's attribution of the open item's outcome."""
        accepted = self._accepted(
            participant,
            form,
            lambda session, item: (
                "answer the item before its outcome"
                if item.item_id not in session.answers
                else "choose what caused the outcome"
                if form.get("cause") not in ATTRIBUTIONS
                else None
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
                "answer": form["cause"],
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
