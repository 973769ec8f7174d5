"""Which track an id loads: registered, else built-in, else an installed entry point."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

import trustbench.core._track as registry
from trustbench.core._track import BUILTIN_TRACKS, load_track, track_targets
from trustbench.errors import InputError

_PLUGIN = "tests.support.echo_track:EchoTrack"


def _installed(monkeypatch: pytest.MonkeyPatch, *points: tuple[str, str]) -> list[str]:
    """Pretend distributions declare `points` in `trustbench.tracks`; count the scans."""
    scans: list[str] = []

    def entry_points(group: str) -> list[EntryPoint]:
        scans.append(group)
        return [EntryPoint(name, value, group) for name, value in points]

    monkeypatch.setattr(registry, "entry_points", entry_points)
    return scans


def test_an_entry_point_adds_a_track(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed(monkeypatch, ("plugin/echo", _PLUGIN))
    track, target = load_track("plugin/echo")
    assert target == _PLUGIN and type(track).__name__ == "EchoTrack"
    assert track_targets()["plugin/echo"] == _PLUGIN


def test_an_entry_point_cannot_replace_a_built_in_track(monkeypatch: pytest.MonkeyPatch) -> None:
    scans = _installed(monkeypatch, ("rtb/review", _PLUGIN))
    _, target = load_track("rtb/review")
    assert target == BUILTIN_TRACKS["rtb/review"]
    assert scans == []  # a built-in id is resolved without scanning installed packages
    assert track_targets()["rtb/review"] == BUILTIN_TRACKS["rtb/review"]


def test_an_unknown_track_names_the_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed(monkeypatch, ("plugin/echo", _PLUGIN))
    with pytest.raises(InputError, match=r"unknown track 'no/such'.*plugin/echo.*rtb/review"):
        load_track("no/such")
