"""Pieces of a `CorpusPolicy` object that every built-in policy builds the same way.

Each version's `_policy.py` declares its models, vocabulary and rules; what it would otherwise
write out again (the reason-code tables from its enum and maps, the schema names of its evidence
records, the control-path members that import the version's `_control.py` only when first asked)
is written once here.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from importlib import import_module
from typing import TYPE_CHECKING, Any, NamedTuple, get_args

if TYPE_CHECKING:
    from trustbench.rtb.platform import FaultType, PlatformSeed
    from trustbench.rtb.policy._protocol import FaultApproval


class ReasonTables(NamedTuple):
    """A vocabulary as the plain strings the harness reads (`reason_codes`, ... of a policy)."""

    codes: tuple[str, ...]
    """Every code, in the enum's order."""
    decision: Mapping[str, str]
    """Code -> the decision it supports."""
    meaning: Mapping[str, str]
    """Code -> its one-line meaning."""
    schema_def: str
    """The vocabulary's `$defs` name in the shipped schemas (pydantic names it by its enum)."""


def reason_tables(
    codes: type[StrEnum], decision: Mapping[Any, Any], meaning: Mapping[Any, str]
) -> ReasonTables:
    """The tables of vocabulary `codes` with its decision and meaning maps (keyed by member)."""
    return ReasonTables(
        tuple(code.value for code in codes),
        {c.value: d.value for c, d in decision.items()},
        {c.value: m for c, m in meaning.items()},
        codes.__name__,
    )


def evidence_defs(evidence_record: Any) -> tuple[str, ...]:
    """The `$defs` names of an evidence union's records: their model names, in the union's order.

    `evidence_record` is a policy's `Annotated[A | B | ..., Field(discriminator="kind")]`; the
    schemas name each record by its model, so the names are read off the union rather than
    listed again beside it.
    """
    records = get_args(get_args(evidence_record)[0])
    return tuple(record.__name__ for record in records)


class LazyControlPath:
    """`seed_platform` and `fault_approval` from a control-path module imported when first used.

    The control-path mapping (and the platform models it builds) is imported by the control-path
    and workflow tracks only: a reviewer run never needs it. A policy names the module and its
    two functions; what each one does is said where the policy names it.
    """

    control_module: str
    """Dotted name of the policy's control-path mapping (`..._control`)."""
    seed_function: str
    """The mapping's function from an authored case to a `PlatformSeed`."""
    fault_function: str
    """The mapping's function from a case and a fault to the approval the fault acts on."""
    control_path = True
    """A policy that names its control-path mapping can run the control-path track."""

    def seed_platform(self, case: Any) -> PlatformSeed:
        """The simulated platform's starting state for `case` (`seed_function`)."""
        return getattr(import_module(self.control_module), self.seed_function)(case)

    def fault_approval(self, case: Any, fault: FaultType) -> FaultApproval | None:
        """The approval `fault` acts on in `case`, or None (`fault_function`)."""
        return getattr(import_module(self.control_module), self.fault_function)(case, fault)
