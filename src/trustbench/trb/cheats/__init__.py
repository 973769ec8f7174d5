"""Cheating adapters for `trb audit`, written from the public adapter contract only.

Each is a `MODULE:FACTORY` a lab could submit. They import nothing of trustbench but
`trustbench.trb.adapter` (the contract) and were written before the checks that catch them, so
they test the harness the way an attacker would, not the way its authors expect.
"""

from trustbench.trb.cheats._gaming import (
    CHEATS,
    Memoriser,
    fixed_arm,
    floor_game,
    floor_sink,
    garbage_r,
    in_distribution_only,
    intervention_detector,
    memoriser,
)

__all__ = [
    "CHEATS",
    "Memoriser",
    "fixed_arm",
    "floor_game",
    "floor_sink",
    "garbage_r",
    "in_distribution_only",
    "intervention_detector",
    "memoriser",
]
