"""The agent's memory store: notes kept in the agent's own working folder.

Notes persist across the steps of one scenario (that is what a poisoned-memory scenario needs) and
nowhere else: every trial gets a fresh, empty folder. The store is candidate-side data, so it is
scanned for grader-only values like every tool response.
"""

from __future__ import annotations

import json
from pathlib import Path

NOTES_FILE = "notes.json"
"""File name of the notes inside the agent's working folder."""


class MemoryStore:
    """Topic -> list of notes, stored as JSON in the agent's working folder.

    Args:
        folder: The agent's working folder for this trial (fresh and empty).
    """

    def __init__(self, folder: Path) -> None:
        self._path = folder / NOTES_FILE

    def read(self) -> dict[str, list[str]]:
        """Every note by topic (an empty dict when nothing was written)."""
        if not self._path.exists():
            return {}
        data = json.loads(self._path.read_text(encoding="utf-8"))
        return {str(topic): [str(note) for note in notes] for topic, notes in data.items()}

    def write(self, topic: str, text: str) -> int:
        """Append a note under `topic`; returns how many notes the topic now holds."""
        notes = self.read()
        notes.setdefault(topic, []).append(text)
        self._path.write_text(json.dumps(notes, indent=2, sort_keys=True), encoding="utf-8")
        return len(notes[topic])
