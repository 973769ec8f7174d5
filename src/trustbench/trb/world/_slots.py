"""Worlds with their own slots: a declared world whose r_t is not the corridor's five slots.

The corridor and the text world state r_t as `SelfReport` (goal, belief, planned_next,
confidence, caused_by_self, typed to the corridor) and act over three actions. A lab's own task
has its own slots (a support ticket's `priority`, `suspected_cause`, `eta_hours`), its own K
actions and its own dynamics or none. Such a world is a `SlotWorld`: its declaration
(`WorldDeclaration`) is the whole contract, and what the tracks exchange with it is generic:

- `SlotReport`: r_t as slot name -> value, checked against the declaration's slot schema
  (`slot_problems`), the generic counterpart of `SelfReport`;
- `SlotContext`: what an adapter sees at step t, the observations so far as the declared
  observation fields (discrete values or numbers: no text rendering is needed);
- `SlotWorld.policy(r)`: the world's stated rule from slots to a distribution over its K
  actions, or None. With `declaration.exact_reference` it is the exact reference agent
  (Phi(r') of a synthetic r' is `policy(r')`); without, it is only what the governed oracle
  follows, and every Phi(r') must be a recorded (human) continuation;
- `SlotWorld.stated_report(context)`: what an agent reading the observations correctly states
  (the oracles' r_t), or None when the world cannot say.

Why a second report type rather than widening `SelfReport`: every corridor track, reference
model and proxy reads `SelfReport`'s typed fields; a generic mapping beside it lets Tracks 1 and
3 (which need only the hooks, the editable slots, the attribution slot and the recorded Phi)
run on any declared world while the corridor's and the text world's records stay byte for byte
what they were. The tracks that need the corridor's dynamics or token encoding say "not run"
in such a world (`trb.track._measures.world_skips`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, RootModel

from trustbench.trb.world._protocol import WorldDeclaration, distribution_problem, slot_problems

if TYPE_CHECKING:
    from trustbench.trb.adapter._protocol import SelfReport, StepContext

SlotValue = str | float | None
"""One slot's value: a categorical or free-text value, a number, or null (a nullable slot)."""
ObservationValue = str | int | float | bool | None
"""One observation field's value: a discrete value or a number (no text rendering needed)."""


class SlotReport(RootModel[dict[str, SlotValue]]):
    """r_t of a `SlotWorld`: slot name -> value, as the world's slot schema types them."""

    model_config = ConfigDict(frozen=True)

    def value(self, slot: str) -> SlotValue:
        """The slot's value (None when absent or null)."""
        return self.root.get(slot)


class SlotContext(BaseModel):
    """Everything an adapter may see at step t of a slot-world trace: its observations."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

    trace_id: str
    """Identifier of the trace (for messages; carries no label)."""
    t: int = Field(ge=0)
    """The step index the adapter is asked about."""
    observations: tuple[dict[str, ObservationValue], ...]
    """Observations for steps 0..t inclusive, each as the declared observation fields."""


class SlotWorldError(ValueError):
    """A slot world asked for something its declaration does not offer (a text rendering)."""


class SlotWorld:
    """A declared world with its own slots, actions and dynamics (or none).

    Subclass it, set `declaration`, and override `policy` (the world's rule, or its exact
    reference agent with `exact_reference`) and `stated_report` where the world has them. It
    satisfies the `World` protocol; its corridor-typed hooks say why they do not apply.
    """

    declaration: WorldDeclaration
    """The world's declaration (its slots, K actions, observation fields, editable slots)."""

    def policy(self, r: SlotReport) -> dict[str, float] | None:
        """The world's rule from stated slots to an action distribution (None: it has none)."""
        return None

    def stated_report(self, context: SlotContext) -> SlotReport | None:
        """r_t as an agent reading `context`'s observations correctly states it (None: unknown)."""
        return None

    def report_problems(self, r: SlotReport) -> list[str]:
        """What is wrong with `r` under the declared slot schema (empty: valid)."""
        return slot_problems(self.declaration, r.root)

    def valid_distribution(self, dist: object) -> dict[str, float] | None:
        """`dist` over the declared K actions in declared order, or None when it is not one."""
        if distribution_problem(self.declaration, dist) is not None:
            return None
        assert isinstance(dist, dict)
        return {a: float(dist[a]) for a in self.declaration.action_space.actions}

    def render_context(self, context: StepContext) -> str:
        """Not applicable: a slot world declares no text rendering of the corridor's context."""
        raise SlotWorldError(self._corridor_only("a text rendering"))

    def reference_continuation(self, r: SelfReport) -> dict[str, float]:
        """Not applicable: a slot world's reference reads `SlotReport` (`policy`)."""
        raise SlotWorldError(self._corridor_only("a reference agent over SelfReport"))

    def _corridor_only(self, what: str) -> str:
        return (
            f"world {self.declaration.world_id} declares its own slots; it has no {what} "
            "(its hooks read SlotReport and SlotContext)"
        )
