"""The aiohttp collection app: one participant, one trace step at a time, on 127.0.0.1.

Routes (session routes are under `/s/<token>`, the participant's access token):

- `GET /s/<token>`: the open item (its display recorded on first view), its Track 3 outcome
  question once answered, the finished page, or the withdrawn page;
- `POST /s/<token>/answer`: the continuation chosen under r' (`nonce`, `action`, `note`);
- `POST /s/<token>/attribute`: the cause of a Track 3 outcome (`nonce`, `cause`; in a world
  with its own slots, its declared attribution slot by name);
- `POST /s/<token>/withdraw`: leave the study (`confirm=yes`).

Nothing else is served: no static files, no folder files, no API. The guards (token, `Host`,
`Origin`, malformed bodies answered 400) are `trustbench._local_app`'s, shared with the RTB
human review app.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

import trustbench
from trustbench._local_app import (
    ServedFolder,
    back_to_session,
    check_origin,
    format_limit,
    html,
    new_app,
    page_renderer,
    posted_form,
    session_owner,
)
from trustbench.core import Ledger, read_ledger
from trustbench.trb.adapter._protocol import ACTIONS, SelfReport
from trustbench.trb.collect._store import CollectionStore, read_frozen
from trustbench.trb.corpus._format import SlotTrace, Trace
from trustbench.trb.world import (
    CategoricalSlot,
    NumberSlot,
    SlotWorld,
    TextSlot,
    WorldDeclaration,
    text_world_for_task,
)

# ------------------------------------------------------------------------------------------------
# Server-rendered pages of the collection app: the corridor a person can read and act in.
#
# Pages are built from what the agent itself saw (its observation history up to step t), its
# stated reasoning r_t and the counterfactual r'. Never passed to a template: the hidden goal and
# door state, the trace id, the gust of a Track 3 outcome or its cause label, other answers.

TITLE = "trustbench TRB continuation session"
"""Title of every page (it names no trace, participant or split)."""
ACTION_TEXT = {"left": "move left", "stay": "stay where it is", "right": "move right"}
"""How each action of the world is offered."""
_SLOTS = (
    ("goal", "goal (which end)"),
    ("belief", "door in front of R"),
    ("planned_next", "planned next move"),
    ("confidence", "confidence it reaches the goal"),
)


render = page_renderer("trustbench.trb.collect", TITLE)
"""Render one template with the common values (title, progress)."""


def message_page(heading: str, message: str, progress: str | None = None) -> str:
    """A page that only says something (landing, finished, withdrawn, unknown link)."""
    return render("message.html.j2", heading=heading, message=message, progress=progress)


def corridor(length: int, position: int) -> dict[str, Any]:
    """The corridor as cells: goals at both ends, the door before the last cell, the agent."""
    cells = []
    for index in range(length):
        goal = "L" if index == 0 else "R" if index == length - 1 else None
        classes = " ".join(c for c, on in (("goal", goal), ("agent", index == position)) if on)
        cells.append(
            {"index": index, "goal": goal, "agent": index == position, "classes": classes,
             "door_before": index == length - 1}
        )  # fmt: skip
    return {"cells": cells}


def _value(r: SelfReport, slot: str) -> str:
    value = getattr(r, slot)
    if slot == "confidence":
        return f"{value:.0%}"
    return ACTION_TEXT[value] if slot == "planned_next" else str(value)


def _history(trace: Trace, t: int) -> list[dict[str, Any]]:
    rows = []
    for i, obs in enumerate(trace.context(t).observations):
        cue = []
        if obs.goal_cue is not None:
            cue.append(f"goal cue: {obs.goal_cue.upper()[0]}")
        if obs.door_cue is not None:
            cue.append(f"door sign: {obs.door_cue}")
        rows.append(
            {"t": i, "position": obs.position, "last_action": obs.last_action,
             "last_gust": obs.last_gust, "cue": "; ".join(cue)}
        )  # fmt: skip
    return rows


def _text_item(trace: Trace, t: int, k: int) -> dict[str, Any]:
    """A text-world item's values: the situation as the model read it, r and r' in words."""
    assert trace.task is not None
    world = text_world_for_task(trace.task, trace.world)
    step = next(s for s in trace.steps if s.t == t)
    cf = step.counterfactuals[k]
    stated = world.render_report(step.r).splitlines()
    changed = world.render_report(cf.r_prime).splitlines()
    reasoning = [
        {
            "name": label,
            "stated": before.partition(": ")[2],
            "counterfactual": after.partition(": ")[2],
            "changed": getattr(step.r, slot) != getattr(cf.r_prime, slot),
        }
        for (slot, label), before, after in zip(world.slot_labels(), stated, changed, strict=True)
        if slot != "caused_by_self"
    ]
    return {
        "situation": world.situation_lines(trace.context(t)),
        "reasoning": reasoning,
        "action_text": world.action_words(),
    }


def item_page(
    *,
    base: str,
    trace: Trace,
    t: int,
    k: int,
    nonce: str,
    progress: str,
    time_limit: str,
    show_model_continuation: bool,
    error: str | None = None,
) -> str:
    """The question page of one item: context up to t, r_t, r', the action form.

    A corridor trace is drawn as cells with its observation history; a text-world trace
    (its `task`) is shown as the text the model read, with r and r' in the task's words and
    the options as the task words them (the form still posts the dynamics' action).
    """
    step = next(s for s in trace.steps if s.t == t)
    cf = step.counterfactuals[k]
    reasoning = [
        {
            "name": name,
            "stated": _value(step.r, slot),
            "counterfactual": _value(cf.r_prime, slot),
            "changed": getattr(step.r, slot) != getattr(cf.r_prime, slot),
        }
        for slot, name in _SLOTS
    ]
    text = _text_item(trace, t, k) if trace.task is not None else None
    action_text = ACTION_TEXT if text is None else text["action_text"]
    shown = None
    if show_model_continuation:
        shown = [(action_text[a], f"{cf.continuation[a]:.0%}") for a in ACTIONS]
    return render(
        "item.html.j2",
        base=base,
        corridor=corridor(trace.world.length, step.observation.position),
        history=_history(trace, t),
        steps_left=step.observation.steps_left,
        t=t,
        reasoning=reasoning if text is None else text["reasoning"],
        situation=None if text is None else text["situation"],
        model_continuation=shown,
        nonce=nonce,
        actions=ACTIONS,
        action_text=action_text,
        progress=progress,
        time_limit=time_limit,
        error=error,
    )


def outcome_page(
    *,
    base: str,
    length: int,
    action: str,
    before: int,
    after: int,
    nonce: str,
    progress: str,
    error: str | None = None,
    action_text: dict[str, str] | None = None,
) -> str:
    """The Track 3 page: where the agent ended up, and the cause question (label not shown).

    `action_text` words the chosen action (a text world's task words; default the corridor's);
    a text world shows levels, not a corridor drawing.
    """
    return render(
        "outcome.html.j2",
        base=base,
        corridor=corridor(length, after) if action_text is None else None,
        action=(action_text or ACTION_TEXT)[action],
        before=before,
        after=after,
        nonce=nonce,
        progress=progress,
        error=error,
    )


# A world with its own slots (`SlotWorld`) is shown from its declaration alone: the observation
# fields as a table of values, r_t and r' slot by slot, its K actions as the choices, and a
# Track 3 question asking its declared attribution slot through a form of the slot's type.


def slot_field(name: str, spec: CategoricalSlot | NumberSlot | TextSlot) -> dict[str, Any]:
    """The form input a declared slot is asked through: its kind decides the input.

    A categorical slot is a choice of its values, a number an input with its bounds (the
    browser's hint; `_store.slot_answer` checks it again), free text a text box.
    """
    field: dict[str, Any] = {"name": name, "description": spec.description, "kind": spec.kind}
    if isinstance(spec, CategoricalSlot):
        field["values"] = spec.values
    elif isinstance(spec, NumberSlot):
        field |= {"low": spec.low, "high": spec.high}
    return field


def _slot_value(value: object) -> str:
    return "—" if value is None else str(value)


def slot_item_page(
    *,
    base: str,
    trace: SlotTrace,
    declaration: WorldDeclaration,
    t: int,
    k: int,
    nonce: str,
    progress: str,
    time_limit: str,
    show_model_continuation: bool,
    error: str | None = None,
) -> str:
    """The question page of a slot-world item: the observations so far, r_t, r', K actions."""
    step = trace.steps[t]
    cf = step.counterfactuals[k]
    fields = declaration.observation.fields
    history = [
        {"t": i, "values": [_slot_value(obs.get(f)) for f in fields]}
        for i, obs in enumerate(trace.context(t).observations)
    ]
    reasoning = [
        {
            "name": slot,
            "description": spec.description,
            "stated": _slot_value(step.r.value(slot)),
            "counterfactual": _slot_value(cf.r_prime.value(slot)),
            "changed": step.r.value(slot) != cf.r_prime.value(slot),
        }
        for slot, spec in declaration.slots.items()
        if slot != declaration.attribution_slot
    ]
    actions = declaration.action_space.actions
    shown = None
    if show_model_continuation:
        phi = cf.continuation  # free text where the world's actions are open-ended
        shown = [("next", phi)] if isinstance(phi, str) else [(a, f"{phi[a]:.0%}") for a in actions]
    return render(
        "slot_item.html.j2", base=base, world=declaration, fields=fields, history=history,
        t=t, reasoning=reasoning, model_continuation=shown,
        model_continuation_recorded=True, nonce=nonce,
        actions=actions, action_text={a: a for a in actions}, progress=progress,
        time_limit=time_limit, error=error,
    )  # fmt: skip


def slot_outcome_page(
    *,
    base: str,
    trace: SlotTrace,
    declaration: WorldDeclaration,
    t: int,
    action: str,
    nonce: str,
    progress: str,
    error: str | None = None,
) -> str:
    """The Track 3 page of a slot world: the recorded next observation, the attribution slot.

    The slot world has no dynamics, so the next step is shown as recorded; its label is never.
    """
    slot = declaration.attribution_slot
    assert slot is not None  # items of a world without one ask no Track 3 question
    after = trace.steps[t + 1].observation
    fields = declaration.observation.fields
    return render(
        "slot_outcome.html.j2", base=base, action=action, fields=fields,
        next_values=[_slot_value(after.get(f)) for f in fields],
        field=slot_field(slot, declaration.slots[slot]), nonce=nonce, progress=progress,
        error=error,
    )  # fmt: skip


STORE_KEY: web.AppKey[CollectionStore] = web.AppKey("store", CollectionStore)
"""Where the app keeps its session store."""


async def _text_form(request: web.Request) -> dict[str, str]:
    """The posted form as text fields; 400 when it cannot be parsed."""
    return {key: str(value) for key, value in (await posted_form(request)).items()}


def _participant(request: web.Request) -> str:
    return session_owner(
        request, lambda: message_page("Unknown session link", "Use the link you were given.")
    )


def _page(request: web.Request, participant: str, error: str | None = None) -> web.Response:
    store = request.app[STORE_KEY]
    session = store.sessions[participant]
    base = f"/s/{request.match_info['token']}"
    if session.withdrawn:
        return html(message_page("You have withdrawn", "None of your answers will be used."))
    opened = store.open_item(participant)
    total = len(session.order)
    if opened is None:
        return html(message_page("Session complete", f"Thank you: all {total} items are recorded."))
    item, shown = opened
    progress = f"item {session.position + 1} of {total}"
    trace = store.frozen.trace(item.trace_id)
    if isinstance(trace, SlotTrace):
        return html(_slot_page(store, base, trace, (item.t, item.k), shown["nonce"], progress,
                               session.answers.get(item.item_id), error))  # fmt: skip
    answer = session.answers.get(item.item_id)
    if answer is not None:  # a Track 3 item answered: ask what caused its outcome
        outcome = answer["outcome"]
        return html(
            outcome_page(
                base=base, length=trace.world.length, action=answer["action"],
                before=outcome["cell_before"], after=outcome["cell_after"],
                nonce=shown["nonce"], progress=progress, error=error,
                action_text=None if trace.task is None else text_world_for_task(
                    trace.task, trace.world).action_words(),
            )
        )  # fmt: skip
    rules = store.frozen.protocol.session
    return html(
        item_page(
            base=base, trace=trace, t=item.t, k=item.k, nonce=shown["nonce"],
            progress=progress, time_limit=format_limit(rules.time_limit_s),
            show_model_continuation=rules.show_model_continuation, error=error,
        )
    )  # fmt: skip


def _slot_page(
    store: CollectionStore,
    base: str,
    trace: SlotTrace,
    item: tuple[int, int],
    nonce: str,
    progress: str,
    answer: dict[str, Any] | None,
    error: str | None,
) -> str:
    """A slot-world item's page: its question, or its Track 3 question once answered."""
    world = store.frozen.slot_world
    assert isinstance(world, SlotWorld)
    t, k = item
    if answer is not None:
        return slot_outcome_page(
            base=base, trace=trace, declaration=world.declaration, t=t,
            action=answer["action"], nonce=nonce, progress=progress, error=error,
        )  # fmt: skip
    rules = store.frozen.protocol.session
    return slot_item_page(
        base=base, trace=trace, declaration=world.declaration, t=t, k=k, nonce=nonce,
        progress=progress, time_limit=format_limit(rules.time_limit_s),
        show_model_continuation=rules.show_model_continuation, error=error,
    )  # fmt: skip


async def _landing(request: web.Request) -> web.Response:
    return html(message_page("Continuation sessions", "Open the session link you were given."))


async def _show(request: web.Request) -> web.Response:
    return _page(request, _participant(request))


def _after(request: web.Request, participant: str, problem: str | None) -> web.Response:
    if problem is None:
        raise back_to_session(request)
    return _page(request, participant, error=problem)


async def _answer(request: web.Request) -> web.Response:
    participant = _participant(request)
    check_origin(request)
    form = await _text_form(request)
    return _after(request, participant, request.app[STORE_KEY].answer(participant, form))


async def _attribute(request: web.Request) -> web.Response:
    participant = _participant(request)
    check_origin(request)
    form = await _text_form(request)
    return _after(request, participant, request.app[STORE_KEY].attribute(participant, form))


async def _withdraw(request: web.Request) -> web.Response:
    participant = _participant(request)
    check_origin(request)
    form = await _text_form(request)
    if form.get("confirm") != "yes":
        return _page(request, participant, error="tick the box to confirm the withdrawal")
    request.app[STORE_KEY].withdraw(participant)
    raise back_to_session(request)


def build_app(store: CollectionStore, tokens: dict[str, str]) -> web.Application:
    """The collection app over a session store.

    Args:
        store: Sessions persisted through the folder's ledger.
        tokens: Access token -> participant pseudonym.
    """
    app = new_app(tokens, _landing, _show)
    app[STORE_KEY] = store
    app.router.add_post("/s/{token}/answer", _answer)
    app.router.add_post("/s/{token}/attribute", _attribute)
    app.router.add_post("/s/{token}/withdraw", _withdraw)
    return app


# ------------------------------------------------------------------------------------------------
# Open a frozen collection folder for serving: lock, protocol check, ledger, sessions, tokens.
#
# `CollectionRun` takes the folder's `RunLock` (so two servers, or a server and `export`, never
# write one ledger at once), re-checks the frozen protocol's hash, opens the ledger keyed to that
# hash (refusing a broken chain), rebuilds every session from it and issues fresh access tokens.
# Closing it appends `collect_serve_stopped` and releases the lock.


@dataclass
class CollectionRun(ServedFolder):
    """A collection folder (`protocol.json`, `ledger.sqlite`) open for serving (context manager)."""

    folder: Path
    """The collection folder."""
    store: CollectionStore | None = None
    """The sessions (set while open)."""

    @property
    def served_folder(self) -> Path:
        """The collection folder."""
        return self.folder

    def _serves(self, participant: str) -> bool:
        """Withdrawn participants get no session link."""
        assert self.store is not None
        return not self.store.sessions[participant].withdrawn

    def _open(self) -> None:
        frozen = read_frozen(self.folder)
        self._ledger = Ledger.open(self.folder, frozen.protocol_sha256)
        self.store = CollectionStore(self._ledger, frozen, read_ledger(self.folder))
        self.tokens = {secrets.token_urlsafe(24): p.id for p in frozen.protocol.participants}
        self._ledger.event(
            "collect_serve_started",
            {
                "pid": os.getpid(),
                "trustbench_version": trustbench.__version__,
                "items_complete": {
                    who: s.position for who, s in sorted(self.store.sessions.items())
                },
            },
        )
        self._ledger.anchor(force=True)
        self.app = build_app(self.store, self.tokens)

    def _close(self, ledger: Ledger) -> None:
        ledger.event("collect_serve_stopped", {"head": ledger.head})
        ledger.anchor(force=True)
