"""Server-rendered pages of the collection app: the corridor a person can read and act in.

Pages are built from what the agent itself saw (its observation history up to step t), its
stated reasoning r_t and the counterfactual r'. Never passed to a template: the hidden goal and
door state, the trace id, the gust of a Track 3 outcome or its cause label, other answers.
"""

from __future__ import annotations

from typing import Any

from trustbench._local_app import page_renderer
from trustbench.trb.adapter._schema import ACTIONS, SelfReport
from trustbench.trb.corpus._format import Trace

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
    """The question page of one item: context up to t, r_t, r', the action form."""
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
    shown = None
    if show_model_continuation:
        shown = [(a, f"{cf.continuation[a]:.0%}") for a in ACTIONS]
    return render(
        "item.html.j2",
        base=base,
        corridor=corridor(trace.world.length, step.observation.position),
        history=_history(trace, t),
        steps_left=step.observation.steps_left,
        t=t,
        reasoning=reasoning,
        model_continuation=shown,
        nonce=nonce,
        actions=ACTIONS,
        action_text=ACTION_TEXT,
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
) -> str:
    """The Track 3 page: where the agent ended up, and the cause question (label not shown)."""
    return render(
        "outcome.html.j2",
        base=base,
        corridor=corridor(length, after),
        action=ACTION_TEXT[action],
        before=before,
        after=after,
        nonce=nonce,
        progress=progress,
        error=error,
    )
