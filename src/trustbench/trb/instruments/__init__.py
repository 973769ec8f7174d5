"""Measurement instruments of the TRB self-audit: adapters whose scores are known in advance."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

if TYPE_CHECKING:
    from trustbench.trb.instruments._oracles import (
        AlwaysSelfOracle,
        EpiphenomenalOracle,
        GovernedOracle,
        OutcomeOnlyOracle,
        UniformOracle,
        audit,
        expected_g,
    )

__all__ = [
    "AlwaysSelfOracle",
    "EpiphenomenalOracle",
    "GovernedOracle",
    "OutcomeOnlyOracle",
    "UniformOracle",
    "audit",
    "expected_g",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
