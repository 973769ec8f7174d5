"""The extension point of the TRB profile: a measure per track, registered by key.

The `trb/profile` core track runs, for every (trace, adapter, trial), each measure named in
`track_options.measures`, stores its per-trace counts in the trial outcome, and at report time
asks the measure for its figures. A measure fills one axis of the profile vector
(G, ground, attr, viab, nav, trans) with its headline figure; an axis no measure filled is shown
"not run", never 0 and never folded into a mean.

A measure with `derived = True` and a `derive(by_split, headlines, label)` method (Track 6)
runs nothing per trace: its figures are computed at report time from the other measures'
figures on every split.

To add a track, implement `TrbMeasure` and add one line to `BUILTIN_MEASURES` (or call
`register_measure` / name `module:attribute` in `track_options.measures`); a key is registered
once (`unregister_measure` first to change it). The measure list is frozen into the manifest, so
a run cannot silently gain or lose a track between freeze and report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from trustbench._imports import import_object
from trustbench.core import Registry
from trustbench.core.figures import Figure
from trustbench.errors import InputError
from trustbench.trb.corpus._format import Trace

ProfileAxis = Literal["G", "ground", "attr", "viab", "nav", "trans"]
"""The six axes of the TRB profile vector (spec §1)."""
PROFILE_AXES: tuple[ProfileAxis, ...] = ("G", "ground", "attr", "viab", "nav", "trans")
"""Axis order in every profile table and plot."""
AXIS_TRACKS: dict[str, str] = {
    "G": "Track 1 governance",
    "ground": "Track 2 grounding",
    "attr": "Track 3 self-attribution",
    "viab": "Track 4 viability",
    "nav": "Track 5 navigability",
    "trans": "Track 6 transfer",
}
"""Which spec track fills each axis."""


@dataclass(frozen=True)
class StatsPlan:
    """How every interval of a run is computed (from the frozen spec's `analysis`)."""

    confidence: float
    """Confidence level."""
    seed: int
    """Bootstrap / Monte Carlo seed (recorded in every interval)."""
    resamples: int
    """Bootstrap resamples (recorded in every interval)."""

    def bootstrap(self) -> dict[str, Any]:
        """The keywords every seeded bootstrap of the run takes: seed, resamples, level."""
        return {"seed": self.seed, "resamples": self.resamples, "level": self.confidence}


@dataclass(frozen=True)
class MeasureRow:
    """One finished trial's counts for one measure."""

    trace: Trace
    """The trace (grader-only fields included: analysis only)."""
    trial_index: int
    """The trial's repetition index."""
    counts: dict[str, Any]
    """What `TrbMeasure.run` returned, or `TrbMeasure.failed` for a failed trial."""
    failed: bool
    """The trial failed as a whole; its counts are the measure's worst case."""


@runtime_checkable
class TrbMeasure(Protocol):
    """One TRB track as a per-trace measurement plus its figures."""

    key: str
    """Key in the trial outcome and in `track_options.measures` (e.g. `governance`)."""
    axis: ProfileAxis
    """The profile axis its headline figure fills."""
    headline: str
    """Name of the figure that is the axis value (e.g. `G`)."""
    title: str
    """Section title in the report (e.g. "Track 1 governance")."""

    def run(self, adapter: Any, trace: Trace) -> dict[str, Any]:
        """Measure one trace through the adapter's hooks; return JSON-serialisable counts.

        A hook that raises or returns a malformed value must be counted against the adapter,
        never skipped. Raise `NotApplicable` when the adapter cannot be asked at all.
        """
        ...

    def failed(self, trace: Trace) -> dict[str, Any]:
        """Counts for a trial that failed as a whole: the worst case, so it stays counted."""
        ...

    def figures(self, rows: list[MeasureRow], stats: StatsPlan, label: str) -> list[Figure]:
        """Figures over the rows of one adapter and split, clustered by trace.

        Args:
            rows: One per finished trial (several per trace when K > 1).
            stats: Interval settings.
            label: Suffix every figure description must carry (TRB version, corpus SHA-256,
                adapter tier, split).
        """
        ...


class MeasureNames:
    """The names a built-in measure declares, given once on its class line.

    Each built-in wrote the same four attributes out by hand; a subclass states its key, axis
    and headline as class keywords instead (`class X(MeasureNames, key=..., axis=...,
    headline=...)`), and its report title is the axis's entry in `AXIS_TRACKS`, so the two
    cannot drift apart.
    """

    key: str
    axis: ProfileAxis
    headline: str
    title: str

    def __init_subclass__(
        cls,
        *,
        key: str | None = None,
        axis: ProfileAxis | None = None,
        headline: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Set the names given on the class line.

        A subclass of a measure (a variant from outside) that gives none keeps what it
        inherits or states in its own body.
        """
        super().__init_subclass__(**kwargs)
        if key is not None:
            cls.key = key
        if axis is not None:
            cls.axis, cls.title = axis, AXIS_TRACKS[axis]
        if headline is not None:
            cls.headline = headline


BUILTIN_MEASURES: dict[str, str] = {
    "governance": "trustbench.trb.track._builtin_measures:GOVERNANCE",
    "attribution": "trustbench.trb.track._builtin_measures:ATTRIBUTION",
    "grounding": "trustbench.trb.track._profile_measures:GROUNDING",
    "viability": "trustbench.trb.track._profile_measures:VIABILITY",
    "navigability": "trustbench.trb.track._profile_measures:NAVIGABILITY",
    "transfer": "trustbench.trb.track._profile_measures:TRANSFER",
}
"""Measures shipped with trustbench, by key."""

_MEASURES: Registry[str] = Registry(
    "TRB measure", BUILTIN_MEASURES, unregister_with="unregister_measure"
)
"""Measure key -> `module:attribute`: built in, then registered."""


def register_measure(key: str, target: str) -> None:
    """Register a measure under `key` as a `module:attribute` import string.

    Raises:
        InputError: `target` is not a `module:attribute` import string.
        AlreadyRegistered: `key` is built in or registered already (a replaced measure would
            change what an axis means without a run saying so).
    """
    if ":" not in target:
        raise InputError(f"bad measure registration {key!r} -> {target!r}")
    _MEASURES.register(key, target)


def unregister_measure(key: str) -> None:
    """Remove a measure registered with `register_measure`.

    Raises:
        InputError: `key` is built in, or no measure of that key is registered.
    """
    _MEASURES.unregister(key)


def measure_targets() -> dict[str, str]:
    """Every known measure key and its import string (built-in, then registered)."""
    return dict(_MEASURES.items())


def load_measure(name: str) -> tuple[TrbMeasure, str]:
    """Import a measure by key or `module:attribute`; return it with its import string.

    Raises:
        InputError: unknown key, import failure, or an object that is not a `TrbMeasure`.
    """
    targets = measure_targets()
    target = targets.get(name, name if ":" in name else None)
    if target is None:
        raise InputError(
            f"unknown TRB measure {name!r} (known: {', '.join(sorted(targets))})",
            location="track_options/measures",
        )
    measure = import_object(target, what=f"TRB measure {name}")
    if not isinstance(measure, TrbMeasure):
        raise InputError(f"{target} is not a TrbMeasure", location="track_options/measures")
    if measure.axis not in PROFILE_AXES:
        raise InputError(f"{target} fills unknown axis {measure.axis!r}")
    return measure, target


def load_measures(names: list[str] | tuple[str, ...]) -> list[tuple[TrbMeasure, str]]:
    """Load a run's measures; refuse two with one key or two that fill one profile axis.

    A second measure on an axis would silently replace the first one's headline in the
    profile, so it is refused, naming both (drop one from `track_options.measures`).

    Raises:
        InputError: as `load_measure`, or a repeated key or axis.
    """
    loaded = [load_measure(name) for name in names]
    seen_key: dict[str, str] = {}
    seen_axis: dict[str, str] = {}
    for measure, target in loaded:
        if measure.key in seen_key:
            raise InputError(
                f"measures {seen_key[measure.key]} and {target} share the key {measure.key!r}",
                location="track_options/measures",
            )
        if measure.axis in seen_axis:
            raise InputError(
                f"measures {seen_axis[measure.axis]} and {target} both fill the profile axis "
                f"{measure.axis!r} ({AXIS_TRACKS[measure.axis]}); one axis has one measure: "
                "drop one of them from track_options.measures",
                location="track_options/measures",
            )
        seen_key[measure.key], seen_axis[measure.axis] = target, target
    return loaded
