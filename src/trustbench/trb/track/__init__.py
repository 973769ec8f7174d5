"""Public API of TRB's shared-harness track (`trb/profile`) and its measure extension point.

`TrbProfileTrack` is registered in core as `trb/profile`; `run_trb_demo` and
`freeze_run_report` run a built-in spec end to end; `register_measure` / `TrbMeasure` add a
track (a profile axis) to the profile (`unregister_measure` removes one registered).
"""

from __future__ import annotations

from trustbench.trb.track._measures import (
    BUILTIN_MEASURES,
    PROFILE_AXES,
    MeasureRow,
    ProfileAxis,
    StatsPlan,
    TrbMeasure,
    load_measure,
    load_measures,
    measure_targets,
    register_measure,
    unregister_measure,
)
from trustbench.trb.track._pipeline import (
    BUILTIN_CORPUS,
    BUILTIN_SPECS,
    TrbTrackOptions,
    builtin_spec,
    freeze_run_report,
    run_trb_demo,
)
from trustbench.trb.track._profile_track import TrbProfileTrack

__all__ = [
    "BUILTIN_CORPUS",
    "BUILTIN_MEASURES",
    "BUILTIN_SPECS",
    "PROFILE_AXES",
    "MeasureRow",
    "ProfileAxis",
    "StatsPlan",
    "TrbMeasure",
    "TrbProfileTrack",
    "TrbTrackOptions",
    "builtin_spec",
    "freeze_run_report",
    "load_measure",
    "load_measures",
    "measure_targets",
    "register_measure",
    "run_trb_demo",
    "unregister_measure",
]
