"""Core's public API for a track's analysis: what a track's analyzer builds and reads.

`TrackAnalysis` is what an analyzer returns; `Evaluability` is a subject's valid-response count;
the evaluability helpers withhold the figures of a subject that mostly gave no valid response
(`core._evaluability` says why); `TrialEvent` / `reduce_events` turn per-trial outcomes into
per-unit counts before a rate is computed. Names resolve lazily (see `trustbench._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

if TYPE_CHECKING:
    from trustbench.core._analysis import (
        VALID_RESPONSE_RATE,
        Analyzer,
        Evaluability,
        TrackAnalysis,
    )
    from trustbench.core._evaluability import (
        not_evaluable_reason,
        not_evaluable_subjects,
        withheld_figure,
    )
    from trustbench.core._figures_from_counts import EventReducer, TrialEvent, reduce_events

__all__ = [
    "VALID_RESPONSE_RATE",
    "Analyzer",
    "Evaluability",
    "EventReducer",
    "TrackAnalysis",
    "TrialEvent",
    "not_evaluable_reason",
    "not_evaluable_subjects",
    "reduce_events",
    "withheld_figure",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
