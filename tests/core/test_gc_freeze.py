"""A run freezes the objects alive at its start and hands them back when it ends."""

from __future__ import annotations

import gc

import pytest

from trustbench.core._runner import long_lived_objects_frozen


def test_objects_alive_at_the_start_are_frozen_during_the_block_and_released_after() -> None:
    assert gc.get_freeze_count() == 0
    with long_lived_objects_frozen():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_a_callers_own_freeze_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # The calls are counted, not the frozen objects: under `pytest -n` the worker's I/O thread
    # frees a few frozen objects at any moment, so the count is no exact witness.
    calls: list[str] = []
    gc.freeze()
    try:
        monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
        monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze"))
        with long_lived_objects_frozen():
            pass
        monkeypatch.undo()
        assert calls == []
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_the_freeze_is_released_when_the_block_raises() -> None:
    try:
        with long_lived_objects_frozen():
            raise RuntimeError("a failed run")
    except RuntimeError:
        pass
    assert gc.get_freeze_count() == 0
