"""Registries of extensions: the generic `Registry`, and the registry of tracks.

The tracks map `"suite/track"` to an import string, imported only when a run needs it.

`Registry` is the one mechanism behind every `register_*` / `unregister_*` pair of the suites
(review metrics, boundaries, TRB measures), so each refuses a duplicate the same way: with
`AlreadyRegistered`, naming the registry and the key.

Lazy loading keeps `trustbench --help` fast and lets a suite register a track with one line in
`BUILTIN_TRACKS` without core importing the suite. Third-party packages can add tracks through the
`trustbench.tracks` entry-point group, but never replace a built-in one: an installed package
must not be able to swap what `rtb/review` runs. So a built-in id is resolved without scanning
the installed distributions' entry points (10 to 15 ms at every `freeze` and `run`); tests call
`register_track`, which does replace.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Generic, TypeVar

from trustbench._imports import import_object
from trustbench.core._track import Track
from trustbench.errors import AlreadyRegistered, InputError, did_you_mean

if TYPE_CHECKING:
    from importlib.metadata import EntryPoints

Entry = TypeVar("Entry")


class Registry(Generic[Entry]):
    """Key -> extension: built-in entries first, then registered ones, in registration order.

    A key is registered once. A second registration raises `AlreadyRegistered` instead of
    replacing the first, because a silent replacement changes what a run measures (a plug-in
    swapping a built-in rate, or two plug-ins fighting over one name, would go unnoticed). To
    change a registered entry, unregister it first; a built-in entry, or a key reserved for
    something the registry does not hold, can be neither replaced nor removed.
    """

    def __init__(
        self,
        what: str,
        built_in: Mapping[str, Entry],
        *,
        reserved: Iterable[str] = (),
        unregister_with: str,
    ) -> None:
        """Start with the built-in entries.

        Args:
            what: The registry's name in messages (e.g. `review metric`).
            built_in: Entries shipped with trustbench, in the order `values()` lists them.
            reserved: Keys taken by something outside the registry (never registrable).
            unregister_with: The public function that removes an entry (named in the refusal).
        """
        self.what = what
        self._entries: dict[str, Entry] = dict(built_in)
        self._fixed = frozenset(built_in) | frozenset(reserved)
        self._unregister_with = unregister_with

    def register(self, key: str, entry: Entry) -> None:
        """Add `entry` under `key`.

        Raises:
            AlreadyRegistered: `key` is built in, reserved or registered already.
        """
        if key in self._fixed:
            raise AlreadyRegistered(
                f"{self.what} {key!r} is built in and cannot be replaced; "
                "register yours under another name"
            )
        if key in self._entries:
            raise AlreadyRegistered(
                f"{self.what} {key!r} is already registered; "
                f"call {self._unregister_with}({key!r}) first to replace it"
            )
        self._entries[key] = entry

    def unregister(self, key: str) -> None:
        """Remove the entry registered under `key`.

        Raises:
            InputError: `key` is built in, or unknown (naming the closest registered key).
        """
        if key in self._fixed:
            raise InputError(f"{self.what} {key!r} is built in and cannot be removed")
        if key not in self._entries:
            hint = did_you_mean(key, [k for k in self._entries if k not in self._fixed])
            raise InputError(f"no {self.what} {key!r} is registered{hint}")
        del self._entries[key]

    def get(self, key: str) -> Entry | None:
        """The entry under `key`, or None."""
        return self._entries.get(key)

    def is_built_in(self, key: str) -> bool:
        """Whether `key` is one of the built-in (or reserved) keys."""
        return key in self._fixed

    def keys(self) -> tuple[str, ...]:
        """Every key, built-in first, then registered ones in registration order."""
        return tuple(self._entries)

    def values(self) -> tuple[Entry, ...]:
        """Every entry, in the order of `keys`."""
        return tuple(self._entries.values())

    def items(self) -> tuple[tuple[str, Entry], ...]:
        """Every (key, entry), in the order of `keys`."""
        return tuple(self._entries.items())

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())


BUILTIN_TRACKS: dict[str, str] = {
    "rtb/review": "trustbench.rtb.review.track:ReviewTrack",
    "rtb/control": "trustbench.rtb.control.track:ControlTrack",
    "rtb/workflow": "trustbench.rtb.workflow.track:WorkflowTrack",
    "trb/profile": "trustbench.trb.track:TrbProfileTrack",
}
"""Tracks shipped with trustbench."""

_registered: dict[str, str] = {}


def register_track(track_id: str, target: str) -> None:
    """Register (or replace) a track under `suite/track`.

    Args:
        track_id: Registry key, `"suite/track"`.
        target: Import string `"package.module:attribute"`; the attribute is a `Track` class
            (instantiated without arguments), a zero-argument factory, or a `Track` instance.
    """
    if track_id.count("/") != 1 or ":" not in target:
        raise InputError(f"bad track registration {track_id!r} -> {target!r}")
    _registered[track_id] = target


def entry_points(group: str) -> EntryPoints:
    """The installed distributions' entry points in `group`.

    `importlib.metadata` is imported here, not with the module: about 10 ms that a run of a
    built-in track never needs.
    """
    from importlib.metadata import entry_points as installed

    return installed(group=group)


def track_targets() -> dict[str, str]:
    """All known tracks and their import strings: registered, else built-in, else entry points."""
    targets = {point.name: point.value for point in entry_points(group="trustbench.tracks")}
    targets.update(BUILTIN_TRACKS)
    targets.update(_registered)
    return targets


def _target(track_id: str) -> str | None:
    found = _registered.get(track_id) or BUILTIN_TRACKS.get(track_id)
    return found if found is not None else track_targets().get(track_id)


def load_track(track_id: str) -> tuple[Track, str]:
    """Import and instantiate the track registered under `track_id`.

    Returns:
        The track and the import string it was loaded from (recorded in the manifest).

    Raises:
        InputError: when the track is unknown or does not satisfy the `Track` protocol.
    """
    target = _target(track_id)
    if target is None:
        known = ", ".join(sorted(track_targets())) or "none"
        hint = did_you_mean(track_id, track_targets())
        raise InputError(
            f"unknown track {track_id!r}{hint} (known: {known})", location="suite/track"
        )
    return track_from_target(target, track_id), target


def track_from_target(target: str, track_id: str) -> Track:
    """Import the track at `target` and instantiate it (as a Ray worker does from a manifest).

    Raises:
        InputError: when it cannot be imported or does not satisfy the `Track` protocol.
    """
    obj = import_object(target, what=f"track {track_id}")
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, Track)):
        obj = obj()
    track = obj
    if not isinstance(track, Track):
        raise InputError(f"{target} is not a Track (needs resolve, plan, run_trial)")
    return track
