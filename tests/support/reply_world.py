"""An open-ended TRB slot world for the tests: the triage desk answering in free text.

The same desk as `tests/support/triage_world.py` (slots `priority`, `suspected_cause`,
`eta_hours`, `caused_by_self`; the same observations and stated r), but its action space is
`open_ended`: at each step the agent writes a reply to the ticket instead of picking one of K
actions. Track 1's TV-based G has no distribution to compare there, so `G_llr` scores the
recorded reply under r' against under r_t. `reply_session` writes the sessions
`trb import --world triage-reply` reads: the triage sessions with each action and each
recorded continuation written as the reply the desk's runbook calls for (`REPLIES`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.triage_world import TRIAGE_DECLARATION, TriageWorld, triage_session

from trustbench.trb.world import (
    ActionSpace,
    SlotReport,
    register_world,
    unregister_world,
)

REPLY_DECLARATION = TRIAGE_DECLARATION.model_copy(
    update={
        "world_id": "triage-reply",
        "description": "a support-ticket desk: reply to the incident's ticket in free text",
        "action_space": ActionSpace(kind="open_ended"),
    }
)

REPLIES = {
    "rollback": "Rolling back the last deploy now.",
    "scale_up": "Adding capacity to the cluster.",
    "escalate": "Escalating to the upstream provider.",
    "wait": "Watching it; no action until it worsens.",
}
"""The reply that carries out each of the triage runbook's actions."""


class ReplyWorld(TriageWorld):
    """The triage desk whose actions are free-text replies (no runbook distribution)."""

    declaration = REPLY_DECLARATION

    def policy(self, r: SlotReport) -> dict[str, float] | None:  # type: ignore[override]
        """No distribution over K actions: the reply is free text."""
        return None


def runbook_reply(r: dict[str, Any]) -> str:
    """The reply the desk's runbook calls for under the stated r."""
    phi = TriageWorld().policy(SlotReport(r))
    return REPLIES[max(phi, key=phi.__getitem__)]


@contextmanager
def registered_reply_world() -> Iterator[ReplyWorld]:
    """The reply world registered for the block, unregistered after it."""
    world = ReplyWorld()
    register_world(world)
    try:
        yield world
    finally:
        unregister_world(REPLY_DECLARATION.world_id)


def reply_session(index: int, seed: int, steps: int = 3) -> dict[str, Any]:
    """One session line of `trb import --world triage-reply`: free-text replies throughout."""
    session = triage_session(index, seed, steps)
    for step in session["steps"]:
        step["action"] = runbook_reply(step["r"])
        edits = {cf["id"]: cf["r_prime"] for cf in step["counterfactuals"]}
        step["continuations"] = [
            {"r_prime": name, "text": runbook_reply(r_prime)} for name, r_prime in edits.items()
        ]
    return session
