"""The `trb/profile` spec the world tests freeze over an imported or generated corpus."""

from __future__ import annotations

import json
from collections.abc import Sequence


def world_profile_spec(measures: Sequence[str], splits: Sequence[str] = ("eval",)) -> str:
    """A `trb/profile` spec reading the corpus folder `corpus` beside it: `measures` on `splits`.

    One trial at a time and 100 bootstrap resamples keep a test's run short; the caller adds
    its own `track_options` lines and `[[candidates]]` after it.
    """
    return f"""
suite = "trb"
track = "profile"
concurrency = 1

[corpus]
path = "corpus"

[analysis]
bootstrap_resamples = 100

[track_options]
measures = {json.dumps(list(measures))}
splits = {json.dumps(list(splits))}
"""
