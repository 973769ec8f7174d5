"""`FigureUnit`, the unit of a figure's denominator, in a leaf module.

A gate declares the unit its figure must be in (`GateSpec.unit`), and gates are part of every
spec; keeping the name here lets the spec be read without importing the figure and interval
models and the statistics behind them, which only `report` uses (issue 35).
"""

from __future__ import annotations

from typing import Literal

FigureUnit = Literal["trial", "case", "group", "scenario", "claim", "element"]
"""What one unit of the denominator is: a trial, a case (K trials reduced), a group, a scenario
(a derived case, K trials reduced), a completion claim, or a required evidence element."""
