"""The fallback sandbox where Landlock is missing: a Python audit hook refusing file access.

`sys.addaudithook` hooks cannot be removed from Python, and every `open`, directory listing,
`os.chdir` and `subprocess` start passes through them, so an adapter written in Python cannot
open the corpus, the cache or the run folder. It is weaker than Landlock: native code (ctypes,
a C extension, a process started with `os.posix_spawn` where not audited) can bypass it. The
worker records the mode ("python audit hook (bypassable by native code)") so the report names it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

MODE = "python audit hook (bypassable by native code)"
"""The fallback's name, as recorded per candidate."""

_PATH_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "os.chdir", "os.walk", "glob.glob"})
_PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn"})


def _roots(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple(os.path.realpath(p) for p in paths)


def install(read_paths: Iterable[str], write_paths: Iterable[str]) -> str:
    """Refuse, from now on, any file access outside the given paths and any new process."""
    allowed = _roots([*read_paths, *write_paths])

    def inside(path: Any) -> bool:
        if isinstance(path, int):  # an already-open descriptor (os.scandir(fd), fdopen)
            return True
        try:
            real = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in allowed)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in _PROCESS_EVENTS:
            raise PermissionError(f"the TRB adapter sandbox refuses {event}")
        if event in _PATH_EVENTS and args and args[0] is not None and not inside(args[0]):
            raise PermissionError(f"the TRB adapter sandbox refuses {event} of {args[0]!r}")

    sys.addaudithook(hook)
    return MODE
