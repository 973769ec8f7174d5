"""The adapter contract: the two hooks every model under test exposes (spec §2).

Everything in the tracks is written against `Adapter`, so a Trace-AI model, a baseline and an
oracle are measured by the same code:

    emit_r(context)                 -> SelfReport          # r_t, the typed schema slots
    act(context, r_override=None)   -> {action: prob}      # if r_override: do(r_t := r')

An adapter declares its tier (`native`: a true do-intervention on an r pathway; `proxy`: a CoT
edit and re-run) and whether it supports overrides. One that does not must raise
`OverrideUnsupported` when given an override, never silently ignore it. An adapter may also
offer batched hooks (`BatchedAdapter`: `emit_many`, `act_many`), which the measures then use.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from trustbench._docstrings import documented

# ------------------------------------------------------------------------------------------------
# The self-representation schema and the candidate-visible step context.
#
# `SelfReport` is the typed r_t every adapter emits and every `r_override` carries: the five
# schema slots the TRB spec names (goal, belief, planned_next, confidence, caused_by_self).
# `StepContext` is all an adapter ever sees of a trace: the observations up to step t, never the
# r snapshot, the counterfactual continuations or the attribution labels (those are grader-only).

TRB_VERSION = "TRB v1.0"
"""The benchmark version every result row names (spec §7: bump Y for pass-bar re-fits and
added transfer contexts, X when a track's definition changes). v0.2 added a transfer context
(the `transfer_cue_delay` family: the cue shown after an unevaluated lead-in). v1.0 (issue 53):
Track 1's headline G* took the cross-edit floor after v0.2 was named, a changed headline
definition, so X is bumped; with it the verdict became three-valued with a pass bar declared
for every track and for R*'s adversarial and OOD members (`trb/track/_profile.py`), and "TRB
score" needs N1 human-Phi r' and N3 human-session labels on the eval split
(`trb/corpus/_format.py`). Results of v0.x are not comparable with v1.0 results."""

ACTIONS: tuple[str, ...] = ("left", "stay", "right")
"""The discrete action set of the reference world, in the order distributions are listed."""

GOALS: tuple[str, ...] = ("left", "right")
DOOR_STATES: tuple[str, ...] = ("open", "closed")
GUSTS: tuple[str, ...] = ("left", "none", "right")

Action = Literal["left", "stay", "right"]
Goal = Literal["left", "right"]
DoorState = Literal["open", "closed"]
Gust = Literal["left", "none", "right"]

EDITABLE_SLOTS: tuple[str, ...] = ("goal", "belief", "planned_next", "confidence")
"""Slots Track 1 edits; caused_by_self is scored by Track 3 and has no do-effect on action."""


class _Strict(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class SelfReport(_Strict):
    """The self-representation r_t: what the agent states about its goal, world and plan."""

    goal: Goal
    """Which end of the corridor the agent says it is trying to reach."""
    belief: DoorState
    """The agent's belief about the door in front of the right goal (open or closed)."""
    planned_next: Action
    """The action the agent says it will take next."""
    confidence: float = Field(ge=0.0, le=1.0)
    """Stated probability that following the plan reaches the goal within the remaining steps."""
    caused_by_self: float | None = Field(default=None, ge=0.0, le=1.0)
    """Stated probability that the agent's own last action caused the last change of position;
    null at the first step, where there is no previous outcome to attribute."""


class Observation(_Strict):
    """What the agent perceives at one step; cues are shown once, at the cue step (often 0)."""

    position: int = Field(ge=0)
    """Cell index in the corridor (0 is the left goal, length-1 the right goal)."""
    steps_left: int = Field(ge=0)
    """Steps remaining in the episode, including this one."""
    goal_cue: Goal | None = None
    """The goal instruction; shown at the cue step only, so later steps must remember it."""
    door_cue: DoorState | None = None
    """The door sign; shown at the cue step only."""
    last_gust: Gust | None = None
    """The gust felt during the previous transition (null at step 0)."""
    last_action: Action | None = None
    """The agent's own previous action (null at step 0)."""


class StepContext(_Strict):
    """Everything an adapter may see at step t of a trace: its observation history."""

    trace_id: str
    """Identifier of the trace (for messages; carries no label)."""
    t: int = Field(ge=0)
    """The step index the adapter is asked about (an evaluated step: never a lead-in step)."""
    observations: tuple[Observation, ...]
    """Observations for steps 0..t inclusive (a delayed cue's lead-in included)."""


class AdapterTier(StrEnum):
    """How an adapter realises r and the intervention on it."""

    NATIVE = "native"
    PROXY = "proxy"


class OverrideUnsupported(Exception):
    """Raised by `act` when an adapter declared `supports_override = False` gets an override."""


@runtime_checkable
class Adapter(Protocol):
    """A model under test, wrapped in the two TRB hooks."""

    name: str
    """Human-readable name used in result rows."""
    tier: AdapterTier
    """`native` or `proxy` (every result row names it)."""
    supports_override: bool
    """Whether `act` performs do(r := r_override); if False, overrides raise."""

    def seed(self, value: int) -> None:
        """Seed every random source the adapter uses, so runs can be repeated exactly."""
        ...

    def emit_r(self, context: StepContext) -> SelfReport:
        """Return the self-representation r_t at the context's step."""
        ...

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> dict[str, float]:
        """Return the action distribution, under do(r_t := r_override) when one is given."""
        ...


@runtime_checkable
class BatchedAdapter(Protocol):
    """Optional batched hooks an adapter may offer beside the two one-context hooks.

    A local model answers a batch in one forward pass instead of one per item, so every
    measure calls these when the adapter has them (through `trb.measures._governance`) and the
    one-context hooks otherwise. The contract: the answer for item i is the one `emit_r` /
    `act(contexts[i], r_override=overrides[i])` would give (equal up to floating-point
    reduction order), in input order, one per item; a batch that raises or returns another
    number of answers is asked again item by item. An adapter may offer either hook alone.
    """

    def emit_many(self, contexts: Sequence[StepContext]) -> list[SelfReport]:
        """`emit_r` for every context, in order."""
        ...

    def act_many(
        self, contexts: Sequence[StepContext], overrides: Sequence[SelfReport | None]
    ) -> list[dict[str, float]]:
        """`act(contexts[i], r_override=overrides[i])` for every i, in order."""
        ...


@runtime_checkable
class LogProbAdapter(Protocol):
    """Optional hook for open-ended actions: the log-probability of a continuation text.

    Track 1's paired log-likelihood-ratio G (`trb.measures.continuation_llr`) asks it twice per
    intervention, under r' and under the stored r, for the same continuation Phi(r') (the human
    or reference action text). An adapter that cannot score text (a chat endpoint without
    log-probabilities, an oracle over discrete actions) simply does not define it, and the
    figure is "not applicable" for it, never 0 (0 is what an adapter that ignores r scores).
    The local language-model proxies (`trb.proxy`) offer it.
    """

    def continuation_logprob(
        self, context: StepContext, r_override: SelfReport | None, continuation: str
    ) -> float:
        """Natural-log probability of `continuation` as the action text at `context`.

        Under do(r_t := r_override), or the adapter's own r_t when None; the sum over the
        continuation's tokens of log p(token | context, r, earlier tokens), not renormalised
        over any option set.
        """
        ...
