"""Measurement instruments of the TRB self-audit: oracles with known scores, Goodhart cheats."""

from __future__ import annotations

from trustbench.trb.instruments._goodhart import (
    HiddenGoal,
    IgnorePlusNudge,
    ReportGarbage,
    SabotagedAblation,
    goodhart_audit,
)
from trustbench.trb.instruments._oracles import (
    AlwaysSelfOracle,
    EpiphenomenalOracle,
    GovernedOracle,
    OutcomeOnlyOracle,
    SlotGovernedOracle,
    SlotRIgnoringOracle,
    TextGovernedOracle,
    TextRIgnoringOracle,
    TextUniformOracle,
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
    "SlotGovernedOracle",
    "SlotRIgnoringOracle",
    "TextGovernedOracle",
    "TextRIgnoringOracle",
    "TextUniformOracle",
    "UniformOracle",
    "audit",
    "expected_g",
    "goodhart_audit",
]
