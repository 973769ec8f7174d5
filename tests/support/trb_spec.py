"""The `trb/profile` spec the world tests freeze over an imported or generated corpus, and the
chat adapters' factory folder of the tests that run one through the track."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

CHAT_FACTORY = Path(__file__).parents[1] / "trb" / "trb_chat_factory.py"
"""The chat adapters' factory module (`chat_factory_folder` copies it)."""


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


def chat_factory_folder(folder: Path, url: str) -> Path:
    """`folder` holding a copy of `tests/trb/trb_chat_factory.py` and the chat server's `url`.

    The caller puts `folder` first on `sys.path`: the adapter's worker then reads its server's
    URL from its own module folder (it inherits no variable of the test's environment).
    """
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(CHAT_FACTORY, folder / CHAT_FACTORY.name)
    (folder / "chat_url.txt").write_text(url, encoding="utf-8")
    return folder
