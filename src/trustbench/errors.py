"""Error types every command maps to an exit code and a message a user can act on.

Exit codes (DESIGN.md contract): 0 success, 1 a failed check or gate, 2 bad usage or input.
Messages name the file, field (JSON pointer) or case so the user knows what to fix.
"""

from __future__ import annotations


class TrustbenchError(Exception):
    """Base class: an error the CLI reports as one clear message instead of a traceback."""

    exit_code: int = 2

    def __init__(self, message: str, *, location: str | None = None) -> None:
        self.message = message
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)


class InputError(TrustbenchError):
    """Bad usage or input: a missing file, unparsable data, an unknown name (exit code 2)."""

    exit_code = 2


class CheckFailed(TrustbenchError):
    """A check ran and failed: corrupt corpus, changed hash, broken chain, failed gate (exit 1)."""

    exit_code = 1
