"""The `trb/profile` core track: TRB through the shared freeze / run / report harness."""

from trustbench.trb._track._measures import (
    BUILTIN_MEASURES,
    PROFILE_AXES,
    MeasureRow,
    StatsPlan,
    TrbMeasure,
    load_measure,
    measure_targets,
    register_measure,
)
from trustbench.trb._track._options import BUILTIN_CORPUS, TrbTrackOptions
from trustbench.trb._track._profile_track import TrbProfileTrack

__all__ = [
    "BUILTIN_CORPUS",
    "BUILTIN_MEASURES",
    "PROFILE_AXES",
    "MeasureRow",
    "StatsPlan",
    "TrbMeasure",
    "TrbProfileTrack",
    "TrbTrackOptions",
    "load_measure",
    "measure_targets",
    "register_measure",
]
