"""Keep the garbage collector's full passes off a run's event loop.

A full (oldest-generation) collection walks every tracked object in the process: every module,
class, compiled schema and model the run has imported or loaded, which is most of the heap and
never garbage. In the latency-bound bench one such pass took about 80 ms of the run's start-up,
and each one during the trials stalls every in-flight trial for as long. `gc.freeze()` moves
the objects alive when the run starts to a permanent generation that collections skip (the
CPython documentation suggests it for this); objects made during the run are collected as
usual. On exit the frozen objects are handed back, so a long-lived caller (a notebook running
several experiments) collects them again.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def long_lived_objects_frozen() -> Iterator[None]:
    """Freeze what is alive now for the duration of the block (unless someone else already did).

    A caller that froze objects itself keeps them frozen: this leaves its freeze alone.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
