"""Measurement instruments of the TRB self-audit: oracles with known scores, Goodhart cheats."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

if TYPE_CHECKING:
    from trustbench.trb.instruments._goodhart import (
        HiddenGoal,
        IgnorePlusNudge,
        ReportGarbage,
        SabotagedAblation,
    )
    from trustbench.trb.instruments._goodhart_audit import goodhart_audit
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
    "HiddenGoal",
    "IgnorePlusNudge",
    "OutcomeOnlyOracle",
    "ReportGarbage",
    "SabotagedAblation",
    "UniformOracle",
    "audit",
    "expected_g",
    "goodhart_audit",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
