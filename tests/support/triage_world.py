"""A TRB world with its own slots for the tests: a support-ticket triage desk.

The same code as docs/trb.md's "A world with its own slots": a `SlotWorld` whose r_t is
`priority`, `suspected_cause`, `eta_hours` and `caused_by_self` (not the corridor's five
slots), whose four actions are `rollback`, `scale_up`, `escalate` and `wait`, whose
observations are discrete (an alert, its severity, who cleared the last one; shown to a chat
model by the default rendering of its declaration) and which has no exact reference agent: its
runbook (`policy`) is what the governed oracle follows, and every Phi(r') is a recorded
continuation. `triage_sessions` writes sessions as `trb import --world triage` reads them, the
people in them following the runbook.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from trustbench.trb.world import (
    ActionSpace,
    CategoricalSlot,
    NumberSlot,
    ObservationFormat,
    SlotContext,
    SlotReport,
    SlotWorld,
    WorldDeclaration,
    register_world,
    unregister_world,
)

TRIAGE_DECLARATION = WorldDeclaration(
    world_id="triage", version="1",
    description="a support-ticket desk: choose the next action on an incident from its alert",
    slots={
        "priority": CategoricalSlot(description="how urgent the incident is",
                                    values=("low", "high")),
        "suspected_cause": CategoricalSlot(description="what the agent thinks caused it",
                                           values=("config", "capacity", "upstream")),
        "eta_hours": NumberSlot(description="hours until the incident is resolved",
                                low=0.0, high=72.0),
        "caused_by_self": NumberSlot(description="P(my last action cleared the last alert)",
                                     low=0.0, high=1.0, nullable=True),
    },
    action_space=ActionSpace(kind="discrete",
                             actions=("rollback", "scale_up", "escalate", "wait")),
    observation=ObservationFormat(
        description="the alert, its severity, and who cleared the previous alert",
        fields=("alert", "severity", "cleared_by"),
    ),
    editable_slots=("priority", "suspected_cause", "eta_hours"),
    attribution_slot="caused_by_self", exact_reference=False,
)  # fmt: skip

RUNBOOK = {"config": "rollback", "capacity": "scale_up", "upstream": "escalate"}
CAUSE_OF_ALERT = {"deploy": "config", "load": "capacity", "provider": "upstream"}


class TriageWorld(SlotWorld):
    declaration = TRIAGE_DECLARATION

    def policy(self, r: SlotReport) -> dict[str, float]:
        """The runbook: fix the cause; wait on a low-priority upstream cause; escalate past 48 h."""
        action = RUNBOOK[str(r.value("suspected_cause"))]
        if action == "escalate" and r.value("priority") == "low":
            action = "wait"
        if float(r.value("eta_hours") or 0.0) > 48:
            action = "escalate"
        return {a: float(a == action) for a in self.declaration.action_space.actions}

    def stated_report(self, context: SlotContext) -> SlotReport:
        """What the alert says: its cause, its priority, and who cleared the previous one."""
        now = context.observations[-1]
        cleared = now.get("cleared_by")
        return SlotReport({
            "priority": "high" if now["severity"] == "sev1" else "low",
            "suspected_cause": CAUSE_OF_ALERT[str(now["alert"])],
            "eta_hours": 4.0 if now["severity"] == "sev1" else 24.0,
            "caused_by_self": None if cleared is None else float(cleared == "me"),
        })  # fmt: skip


@contextmanager
def registered_triage_world() -> Iterator[TriageWorld]:
    """The triage world registered for the block, unregistered after it."""
    world = TriageWorld()
    register_world(world)
    try:
        yield world
    finally:
        unregister_world(TRIAGE_DECLARATION.world_id)


def _edits(r: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """One r' per editable slot: another priority, another cause, an ETA past 48 h or back."""
    causes = [c for c in ("config", "capacity", "upstream") if c != r["suspected_cause"]]
    return [
        ("priority", {**r, "priority": "low" if r["priority"] == "high" else "high"}),
        ("suspected_cause", {**r, "suspected_cause": causes[0]}),
        ("eta_hours", {**r, "eta_hours": 60.0 if r["eta_hours"] <= 48 else 4.0}),
    ]


def _choice(world: TriageWorld, r: dict[str, Any]) -> str:
    phi = world.policy(SlotReport(r))
    return max(phi, key=phi.__getitem__)


def triage_session(index: int, seed: int, steps: int = 3) -> dict[str, Any]:
    """One session line of `trb import --world triage`: people following the runbook.

    Each step's three r' are paired-session values with the recorded choices of three people
    acting on them (all the runbook's action); from the second step the outcome label says
    whether the agent's own last action cleared the previous alert.
    """
    world, rng = TriageWorld(), random.Random(seed * 1000 + index)
    lines, observations = [], []
    for t in range(steps):
        cleared = None if t == 0 else rng.choice(("me", "provider"))
        observation = {"alert": rng.choice(tuple(CAUSE_OF_ALERT)),
                       "severity": rng.choice(("sev1", "sev3")), "cleared_by": cleared}  # fmt: skip
        observations.append(observation)
        r = world.stated_report(SlotContext(trace_id="s", t=t, observations=tuple(observations)))
        entry: dict[str, Any] = {
            "observation": observation, "r": r.root, "action": _choice(world, r.root),
            "counterfactuals": [
                {"id": slot, "slot": slot, "provenance": "paired_session", "r_prime": r_prime}
                for slot, r_prime in _edits(r.root)
            ],
            "continuations": [
                {"r_prime": slot, "actions": {_choice(world, r_prime): 3}}
                for slot, r_prime in _edits(r.root)
            ],
        }  # fmt: skip
        if t:
            entry["outcome"] = {"caused_by_self": cleared == "me"}
        lines.append(entry)
    return {"session": f"desk-{seed}-{index}", "split": "eval", "collected_by": "Desk Lab",
            "steps": lines}  # fmt: skip
