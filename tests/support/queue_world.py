"""A plug-in TRB world for the tests: a support queue, declared outside trustbench.

The same code as docs/trb.md's "Bring your own world": a `TextWorld` subclass with its own
declaration (id `queue`, its own slot descriptions, three option keys `serve`, `wait`,
`admit`) and its own words for one task kind; its reference agent is the exact one under the
words. `registered_queue_world` registers it for one test and removes it after, so no other
test sees a world it did not ask for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import ClassVar

from trustbench.trb.adapter import Observation, SelfReport
from trustbench.trb.corpus import Trace
from trustbench.trb.corpus._format import Split
from trustbench.trb.corpus._generate import generate_text_split
from trustbench.trb.world import (
    ActionSpace,
    NumberSlot,
    ObservationFormat,
    TaskWording,
    TextSlot,
    TextTask,
    TextWorld,
    WorldDeclaration,
    register_world,
    unregister_world,
)
from trustbench.trb.world._text import TEXT_DYNAMICS

QUEUE_DECLARATION = WorldDeclaration(
    world_id="queue",
    version="1",
    description="a support queue: bring the open tickets to the count the task names",
    slots={
        "goal": TextSlot(description="the ticket count aimed at, in the task's words"),
        "belief": TextSlot(description="whether the last ticket slot is reserved"),
        "planned_next": TextSlot(description="the next action, as an option's words"),
        "confidence": NumberSlot(description="P(the plan reaches the goal)", low=0.0, high=1.0),
        "caused_by_self": NumberSlot(
            description="P(my last action made the last change)", low=0.0, high=1.0, nullable=True
        ),
    },
    action_space=ActionSpace(kind="discrete", actions=("serve", "wait", "admit")),
    observation=ObservationFormat(
        description="one line per step: the action, the triage bot's move, the open tickets",
        fields=("step", "operation", "interference", "level", "steps_left", "task", "note"),
    ),
    editable_slots=("goal", "belief", "planned_next", "confidence"),
    attribution_slot="caused_by_self",
    exact_reference=True,
)


class QueueWorld(TextWorld):
    """The support queue: serve, wait or admit; the triage bot sometimes acts instead."""

    declaration = QUEUE_DECLARATION
    wordings: ClassVar[Mapping[str, TaskWording]] = {
        "queue": TaskWording(
            system="the support queue",
            other_actor="the triage bot",
            level="{n} open tickets",
            goals={"left": "clear the queue to 0 open tickets",
                   "right": "fill the queue to {top} open tickets"},
            facts={"open": "the last ticket slot is free",
                   "closed": "the last ticket slot is reserved"},
            moved={"left": "closed a ticket", "right": "opened a ticket"},
            options={"serve": "serve a ticket", "wait": "wait for the next ticket",
                     "admit": "admit a ticket"},
        )
    }  # fmt: skip


@contextmanager
def registered_queue_world() -> Iterator[QueueWorld]:
    """The queue world registered for the block, unregistered after it."""
    world = QueueWorld()
    register_world(world)
    try:
        yield world
    finally:
        unregister_world(QUEUE_DECLARATION.world_id)


def queue_traces(split: Split, n_traces: int, seed: int) -> list[Trace]:
    """Exact reference-agent traces of the queue task, with no lead-in (as sessions are)."""
    dynamics = TEXT_DYNAMICS.model_copy(update={"cue_step": 0})
    return generate_text_split(split, n_traces, seed, (TextTask(kind="queue"),), dynamics)


def _words(world: QueueWorld, r: SelfReport) -> dict[str, object]:
    """r as a session states it: the word slots in the task's words, the numbers as numbers."""
    labels = {label: slot for slot, label in world.slot_labels()}
    block = dict(line.split(": ", 1) for line in world.render_report(r).splitlines())
    words: dict[str, object] = {labels[label]: text for label, text in block.items()}
    return {**words, "confidence": r.confidence, "caused_by_self": r.caused_by_self}


def _observation(world: QueueWorld, obs: Observation) -> dict[str, object]:
    """One observation as its declared fields, in the queue task's words."""
    wording, top = QueueWorld.wordings["queue"], world.dynamics.length - 1
    fields: dict[str, object] = {"level": obs.position, "steps_left": obs.steps_left}
    if obs.last_action is not None:
        fields["operation"] = world.action_words()[obs.last_action]
        gust = obs.last_gust or "none"
        fields["interference"] = (
            "none" if gust == "none" else f"{wording.other_actor} {wording.moved[gust]}"
        )
    if obs.goal_cue is not None:
        fields["task"] = wording.goals[obs.goal_cue].format(top=top)
    if obs.door_cue is not None:
        fields["note"] = wording.facts[obs.door_cue]
    return fields


def queue_session(trace: Trace, collected_by: str = "Queue Lab") -> dict[str, object]:
    """One trace of the queue world as a session line of `trustbench trb import`.

    Its r' are the trace's synthetic revisions (no human continuation, so Phi(r') is the
    reference agent's) and each later step's Track 3 label is the trace's exact one.
    """
    assert trace.task is not None
    world = QueueWorld(trace.task, trace.world)
    wording, top = QueueWorld.wordings["queue"], world.dynamics.length - 1
    steps = []
    for step in trace.steps:
        entry: dict[str, object] = {
            "observation": _observation(world, step.observation),
            "r": _words(world, step.r),
            "action": next(iter(world.to_option_keys({step.action: 1.0}))),
            "counterfactuals": [
                {"id": f"r{k}", "slot": cf.slot, "provenance": cf.provenance,
                 "r_prime": _words(world, cf.r_prime)}
                for k, cf in enumerate(step.counterfactuals)
            ],
        }  # fmt: skip
        if step.attribution is not None:
            entry["outcome"] = step.attribution.model_dump()
        steps.append(entry)
    return {
        "session": trace.trace_id, "split": trace.split, "collected_by": collected_by,
        "world": {"cue_step": 0}, "task": {"kind": "queue"},
        "goal": wording.goals[trace.goal].format(top=top), "door": wording.facts[trace.door],
        "steps": steps,
    }  # fmt: skip
