"""A candidate that reports the environment it was given (written as a key thief would look).

`environment` answers the whole environment (names and values) to a test calling it directly;
`reviewer` answers every review request with the sorted names only, since a run redacts the
values of declared keys from everything it stores.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any


def environment(settings: dict[str, Any]) -> dict[str, str]:
    """Every variable of this process's environment, with its value."""
    return dict(os.environ)


def reviewer(settings: dict[str, Any]) -> Callable[[Any], str]:
    """A reviewer whose every answer is the names of its environment's variables (JSON)."""

    def respond(request: Any) -> str:
        return json.dumps(sorted(os.environ))

    return respond
