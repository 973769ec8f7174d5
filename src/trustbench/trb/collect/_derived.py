"""Human sessions as corpus traces: Phi(r') entries and the Track 3 outcome traces.

`with_human_phi` turns a served trace into its exported form: at a served step every r' that
received answers carries the human Phi(r') (the empirical distribution of the participants'
chosen actions, `paired_session`, `human`, with its `HumanCollection` provenance); r' values of
the step that were not answered keep their synthetic reference continuation; steps the protocol
did not serve keep no counterfactual (their synthetic edits would only inflate the synthetic
share). `synthetic_only` is the same trace with every served step's synthetic continuations:
the synthetic-only figure beside the human one.

`outcome_trace` is a Track 3 item as a trace: the source trace up to step t, where the
participant's move and the protocol's exogenous change replace the recorded action and gust,
then step t+1 with the resulting observation and its but-for `Attribution` label; its
`session` names the paired session (Track 3 reports it apart from the reference traces). Its earlier
steps carry neither counterfactuals nor labels (the source trace already scores them), and its
last step's action is the reference agent's under a seeded draw (never scored by Tracks 1/3).
The gust is stored as a draw inside the band `CorridorWorld.gust_of` maps to it.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from trustbench.trb.adapter._schema import ACTIONS, Observation
from trustbench.trb.collect._protocol import FrozenProtocol, Item
from trustbench.trb.collect._store import session_id
from trustbench.trb.corpus._format import (
    Attribution,
    Counterfactual,
    HumanCollection,
    Step,
    Trace,
)
from trustbench.trb.world import CorridorWorld, reference_continuation, sample_action

Answer = tuple[str, str, str]
"""(participant, session id, action)."""


def empirical(actions: list[str]) -> dict[str, float]:
    """The distribution of the chosen actions, keyed by every action of the world."""
    counts = Counter(actions)
    return {a: counts[a] / len(actions) for a in ACTIONS}


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


def _gust_draw(world: CorridorWorld, gust: str) -> float:
    p = world.config.gust_probability
    return {"left": p / 4, "right": 3 * p / 4, "none": (1 + p) / 2}[gust]


def outcome_trace(
    frozen: FrozenProtocol, item: Item, participant: str, answer: dict[str, Any]
) -> Trace:
    """A Track 3 item answered by `participant` as a trace ending at the labelled step t+1."""
    trace = frozen.trace(item.trace_id)
    world = CorridorWorld(trace.world)
    outcome = answer["outcome"]
    gust, action = outcome["gust"], answer["action"]
    assert world.gust_of(_gust_draw(world, gust)) == gust
    steps: list[Step] = []
    for step in trace.steps:
        if step.t > item.t:
            break
        update: dict[str, Any] = {"counterfactuals": (), "attribution": None}
        if step.t == item.t:
            update |= {"action": action, "gust_draw": _gust_draw(world, gust)}
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
