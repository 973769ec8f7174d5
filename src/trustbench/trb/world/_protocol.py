"""The world protocol: what a TRB world declares, so tracks and adapters read it, not constants.

A TRB corpus is recorded in one world. The world's declaration (`WorldDeclaration`) is data:

- its id and version (`world_id`, `version`);
- the slot schema of r_t: each slot typed as a categorical with its values, a number with its
  bounds (nullable where the slot has no value at some steps), or free text that the world's
  own parser reads;
- the action space: K discrete actions (in the order distributions are listed), or open-ended
  text;
- the observation format: what one observation holds, in words, and its fields;
- which slots Track 1 edits (`editable_slots`) and Track 3's attribution slot;
- whether the world has an exact reference agent (a synthetic world's Phi(r') is then exact).

A `World` pairs the declaration with the behaviour a declaration cannot hold as data: how a
step context renders to text for proxy adapters (`render_context`) and the reference agent's
continuation Phi(r) (`reference_continuation`). The declaration's digest (`declaration_sha256`,
the SHA-256 of its canonical JSON) is recorded in a corpus manifest and in every result row
beside the world id, so two results are known to share a world, not assumed to.

Why data and not a class hierarchy: the same declaration is hashed, written to a manifest,
shown in a report and checked against a corpus, and an engineer declaring a new world writes
one object (docs/trb.md, "Worlds").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field, model_validator

from trustbench._canonical import json_sha256
from trustbench._docstrings import documented

if TYPE_CHECKING:
    from trustbench.trb.adapter._protocol import SelfReport, StepContext


class _Declared(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class CategoricalSlot(_Declared):
    """A slot that takes one of a fixed list of values."""

    kind: Literal["categorical"] = "categorical"
    """Discriminator."""
    description: str
    """What the slot states, in words."""
    values: tuple[str, ...] = Field(min_length=2)
    """The values the slot may take, in a fixed order."""


class NumberSlot(_Declared):
    """A slot that takes a number between two bounds (or null where the world says so)."""

    kind: Literal["number"] = "number"
    """Discriminator."""
    description: str
    """What the slot states, in words."""
    low: float
    """Smallest allowed value."""
    high: float
    """Largest allowed value."""
    nullable: bool = False
    """Whether the slot may be null (e.g. caused_by_self at a step with nothing to attribute)."""


class TextSlot(_Declared):
    """A slot written as free text; the world's parser maps it to what the tracks compare."""

    kind: Literal["text"] = "text"
    """Discriminator."""
    description: str
    """What the slot states, in words (and what the world's parser accepts)."""
    nullable: bool = False
    """Whether the slot may be absent at some steps."""


SlotSpec = Annotated[CategoricalSlot | NumberSlot | TextSlot, Field(discriminator="kind")]
"""One typed slot of r_t."""


class ActionSpace(_Declared):
    """What an agent may do at a step: K discrete actions, or open-ended text."""

    kind: Literal["discrete", "open_ended"]
    """`discrete`: act returns a distribution over `actions`; `open_ended`: free text."""
    actions: tuple[str, ...] = ()
    """The K discrete actions, in the order distributions are listed (empty when open-ended)."""

    @model_validator(mode="after")
    def _actions_match_kind(self) -> ActionSpace:
        """A discrete space names at least two distinct actions; an open-ended one names none."""
        if self.kind == "discrete" and (
            len(self.actions) < 2 or len(set(self.actions)) != len(self.actions)
        ):
            raise ValueError("a discrete action space names at least two distinct actions")
        if self.kind == "open_ended" and self.actions:
            raise ValueError("an open-ended action space lists no actions")
        return self


class ObservationFormat(_Declared):
    """What one observation of the world holds."""

    description: str
    """The observation in words (what an agent perceives at one step)."""
    fields: tuple[str, ...]
    """The fields of one observation, in order."""


class WorldDeclaration(_Declared):
    """Everything a TRB world declares about itself (see the module docstring)."""

    world_id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    """The world's registry key, recorded in every corpus manifest and result row."""
    version: str
    """The world's version: bump it when slots, actions or the reference agent change."""
    description: str
    """The world in one or two sentences."""
    slots: dict[str, SlotSpec]
    """The slot schema of r_t: slot name -> its type, in the order slots are listed."""
    action_space: ActionSpace
    """The actions an agent chooses from."""
    observation: ObservationFormat
    """What one observation holds."""
    editable_slots: tuple[str, ...]
    """The slots Track 1 edits to make counterfactual values r'."""
    attribution_slot: str | None
    """The slot Track 3 reads the agent's attribution from (None: Track 3 does not apply)."""
    exact_reference: bool
    """Whether the world has an exact reference agent, so Phi(r') of a synthetic r' is exact."""

    @model_validator(mode="after")
    def _named_slots_exist(self) -> WorldDeclaration:
        """Editable and attribution slots are declared slots; the attribution slot is numeric."""
        unknown = [s for s in self.editable_slots if s not in self.slots]
        if unknown:
            raise ValueError(f"editable_slots names undeclared slots {unknown}")
        if self.attribution_slot is not None:
            spec = self.slots.get(self.attribution_slot)
            if spec is None:
                raise ValueError(f"attribution_slot {self.attribution_slot!r} is not declared")
            if not isinstance(spec, NumberSlot):
                raise ValueError("the attribution slot is a number slot (a stated probability)")
        return self


def declaration_sha256(declaration: WorldDeclaration) -> str:
    """`sha256:<hex>` of the declaration's RFC 8785 canonical JSON (recorded beside its id)."""
    return f"sha256:{json_sha256(declaration.model_dump(mode='json'))}"


def slot_problems(declaration: WorldDeclaration, report: Mapping[str, object]) -> list[str]:
    """What is wrong with a report's slot values under the declared schema (empty: valid).

    Each problem names the slot: an unknown slot, a missing one, a categorical value outside
    its values, a number outside its bounds, or a non-string text. Used to validate what an
    adapter emits and what a file states, with the same words everywhere.
    """
    problems = [f"{name}: not a declared slot" for name in report if name not in declaration.slots]
    for name, spec in declaration.slots.items():
        value = report.get(name)
        if value is None:
            if not getattr(spec, "nullable", False):
                problems.append(f"{name}: missing")
            continue
        problem = slot_value_problem(spec, value)
        if problem:
            problems.append(f"{name}: {problem}")
    return problems


def slot_value_problem(spec: CategoricalSlot | NumberSlot | TextSlot, value: object) -> str | None:
    """Why `value` is outside the slot's declared type (None: it fits).

    A categorical value outside its values, a non-number or a number outside the bounds, a
    non-string text. Null is the caller's to judge (`nullable`).
    """
    if isinstance(spec, CategoricalSlot):
        return None if value in spec.values else f"{value!r} is not one of {list(spec.values)}"
    if isinstance(spec, NumberSlot):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{value!r} is not a number"
        if not math.isfinite(value) or not spec.low <= value <= spec.high:
            return f"{value!r} is outside [{spec.low}, {spec.high}]"
        return None
    return None if isinstance(value, str) else f"{value!r} is not text"


NORMALISATION_TOLERANCE = 1e-6
"""|sum p - 1| allowed for an action distribution."""


def distribution_problem(declaration: WorldDeclaration, dist: object) -> str | None:
    """Why `dist` is not a distribution over the declared discrete actions (None: it is).

    Keys must be exactly the declared actions; values finite, non-negative and summing to 1
    within `NORMALISATION_TOLERANCE`. The conformance kit reports the message; the measures
    count a distribution with a problem as invalid.
    """
    actions = declaration.action_space.actions
    if not isinstance(dist, dict):
        return f"expected a dict over {list(actions)}, got {type(dist).__name__}"
    if set(dist) != set(actions):
        return f"expected keys {sorted(actions)}, got {sorted(map(str, dist))}"
    if any(isinstance(dist[a], str | bytes | bool) for a in actions):
        # float() would read "1" or True as a probability: a malformed answer, never a valid one
        return f"expected numeric probabilities, got {dist!r}"
    try:
        values = [float(dist[a]) for a in actions]
    except (TypeError, ValueError):
        return f"expected numeric probabilities, got {dist!r}"
    if any(not math.isfinite(v) or v < 0 for v in values):
        return f"expected finite non-negative probabilities, got {dist!r}"
    total = sum(values)
    if abs(total - 1.0) > NORMALISATION_TOLERANCE:
        return (
            f"expected probabilities summing to 1 (±{NORMALISATION_TOLERANCE}), got sum {total:.6g}"
        )
    return None


@runtime_checkable
class World(Protocol):
    """A declared world: its declaration plus what a declaration cannot hold as data."""

    declaration: WorldDeclaration
    """The world's declaration (hashed into every corpus manifest and result row)."""

    def render_context(self, context: StepContext) -> str:
        """The step context in words: what a proxy adapter shows a language model."""
        ...

    def reference_continuation(self, r: SelfReport) -> dict[str, float]:
        """Phi(r): the exact reference agent's action distribution when acting on r."""
        ...
