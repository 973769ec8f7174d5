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
    "TextGovernedOracle",
    "TextRIgnoringOracle",
    "TextUniformOracle",
    "UniformOracle",
    "audit",
    "expected_g",
    "goodhart_audit",
]
