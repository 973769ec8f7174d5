"""Reading a large ledger ahead: the whole file is advised, in steps, and only when it fits."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from trustbench.core import _verify as prefetching
from trustbench.core.ledger._store import LEDGER_FILE


def _advice_recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int]]:
    """Each `posix_fadvise(offset, length, advice)` made from now on."""
    calls: list[tuple[int, int, int]] = []

    def record(descriptor: int, offset: int, length: int, advice: int) -> None:
        calls.append((offset, length, advice))

    monkeypatch.setattr(os, "posix_fadvise", record, raising=False)
    return calls


def _sparse_file(path: Path, size: int) -> Path:
    with path.open("wb") as handle:
        handle.truncate(size)  # sparse: no disk used for the test's "large" ledger
    return path


def test_a_large_ledger_is_advised_whole_in_steps_and_its_log_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _advice_recorded(monkeypatch)
    monkeypatch.setattr(prefetching, "_free_memory_bytes", lambda: 1 << 40)
    size = prefetching.FROM_BYTES + 3 * prefetching.STEP_BYTES + 5
    _sparse_file(tmp_path / LEDGER_FILE, size)
    _sparse_file(tmp_path / f"{LEDGER_FILE}-wal", prefetching.FROM_BYTES)
    thread = prefetching.prefetch_ledger(tmp_path)
    assert thread is not None
    thread.join(timeout=30)
    step = prefetching.STEP_BYTES
    ledger_steps = -(-size // step)
    assert len(calls) == ledger_steps + prefetching.FROM_BYTES // step
    assert {advice for _, _, advice in calls} == {os.POSIX_FADV_WILLNEED}
    covered = [offset for offset, _, _ in calls[:ledger_steps]]
    assert covered == list(range(0, size, step))  # every byte of the ledger, in order
    assert all(length == step for _, length, _ in calls)


@pytest.mark.parametrize(
    ("size", "free", "expected"),
    [
        (prefetching.FROM_BYTES - 1, 1 << 40, False),  # small: read faster than advised
        (prefetching.FROM_BYTES, 1 << 40, True),
        (1 << 30, (2 << 30) - 1, False),  # more than half the free memory: would evict itself
        (1 << 30, 2 << 30, True),
        (1 << 30, None, False),  # free memory unknown: no advice
    ],
)
def test_only_files_large_enough_and_fitting_in_half_the_free_memory_are_advised(
    size: int, free: int | None, expected: bool
) -> None:
    assert prefetching.worth_prefetching(size, free) is expected


def test_nothing_is_advised_for_a_small_ledger_a_missing_one_or_without_fadvise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _advice_recorded(monkeypatch)
    monkeypatch.setattr(prefetching, "_free_memory_bytes", lambda: 1 << 40)
    assert prefetching.prefetch_ledger(tmp_path) is None  # no ledger: the reader names it
    _sparse_file(tmp_path / LEDGER_FILE, 1 << 20)
    assert prefetching.prefetch_ledger(tmp_path) is None
    _sparse_file(tmp_path / LEDGER_FILE, prefetching.FROM_BYTES)
    monkeypatch.delattr(os, "posix_fadvise")
    assert prefetching.prefetch_ledger(tmp_path) is None
    assert calls == []


def test_advice_the_file_system_refuses_leaves_the_file_to_be_read_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: int) -> None:
        raise OSError(22, "Invalid argument")

    escaped: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: escaped.append(args.exc_value))
    monkeypatch.setattr(os, "posix_fadvise", refuse, raising=False)
    monkeypatch.setattr(prefetching, "_free_memory_bytes", lambda: 1 << 40)
    path = _sparse_file(tmp_path / LEDGER_FILE, prefetching.FROM_BYTES)
    thread = prefetching.prefetch(path)
    assert thread is not None
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert escaped == []  # the refusal stayed inside the advice
    assert path.stat().st_size == prefetching.FROM_BYTES  # untouched
