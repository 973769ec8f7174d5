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
from typing import Protocol, runtime_checkable

from trustbench.trb.adapter._schema import SelfReport, StepContext


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
    measure calls these when the adapter has them (through `trb.measures._batched`) and the
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
