"""Import a `module:attribute` string named in a spec, with an error a user can act on.

Shared by core (tracks, in-process candidates) and the suites (boundaries, agents, adapters), so it
lives beneath both.
"""

from __future__ import annotations

import importlib
from typing import Any

from trustbench.errors import InputError


def import_object(target: str, *, what: str) -> Any:
    """Import `module:attribute`, turning failures into an `InputError` naming `what`."""
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        return getattr(module, attribute)
    except (ImportError, AttributeError) as error:
        raise InputError(f"cannot import {target!r}: {error}", location=what) from None
