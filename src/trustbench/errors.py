"""Error types every command maps to an exit code and a message a user can act on.

Exit codes (DESIGN.md contract): 0 success, 1 a failed check or gate, 2 bad usage or input.
Messages name the file, field (JSON pointer) or case so the user knows what to fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class TrustbenchError(Exception):
    """Base class: an error the CLI reports as one clear message instead of a traceback."""

    exit_code: int = 2

    def __init__(self, message: str, *, location: str | None = None) -> None:
        self.message = message
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)

    def __reduce__(self) -> tuple[object, ...]:
        # Pickled as its parts, so an error raised in a second process (a `report`'s
        # verification, see `core/_verify.py`) arrives with its location intact.
        return (_rebuilt, (type(self), self.message, self.location))


def _rebuilt(kind: type[TrustbenchError], message: str, location: str | None) -> TrustbenchError:
    return kind(message, location=location)


class InputError(TrustbenchError):
    """Bad usage or input: a missing file, unparsable data, an unknown name (exit code 2)."""

    exit_code = 2


class AlreadyRegistered(InputError):
    """A second registration of a key an extension registry already holds (exit code 2).

    Every registry refuses it the same way (`trustbench.core.Registry`): a registration that
    replaced the first would change what a run measures without anyone asking for it.
    """


class CheckFailed(TrustbenchError):
    """A check ran and failed: corrupt corpus, changed hash, broken chain, failed gate (exit 1)."""

    exit_code = 1


def did_you_mean(word: object, known: Iterable[str]) -> str:
    """A `"; did you mean 'x'?"` suffix for an unknown name, or `""` when nothing is close.

    A typo (`transport_max_retires`, `refrence-policy`) should be one look away from its fix,
    not a scan of a list of every known name.

    Args:
        word: The name the user wrote (anything; only a string can be close to a name).
        known: The names it should have been one of.

    Returns:
        The suffix naming the closest known name (difflib's ratio >= 0.6), or "".
    """
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    if not close:
        return ""
    return f"; did you mean {close[0]!r}?"


SKIP_PREFLIGHT_HINT = " (trustbench run --no-preflight skips this check)"
"""How a failed preflight can be skipped: only where a run folder is kept to run again."""
ALLOW_MISSING_KEYS_HINT = " or freeze with --allow-missing-keys"
"""How `freeze` can go on without a key: not for a quick path, which freezes and runs at once."""
RUN_FOLDER_HINTS = (SKIP_PREFLIGHT_HINT, ALLOW_MISSING_KEYS_HINT)
"""Parts of refusals that name a flag for a kept run folder: a quick path that removed its
folder drops them (the fix there is to rerun the same command)."""
