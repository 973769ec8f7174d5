"""A corpus folder's files read once: every hash and every parse comes from the same bytes.

Reading a file to hash it and again to parse it leaves a window in which the file can change
between the two. The hash a freeze records would then vouch for bytes nobody validated, and
`load_frozen_corpus`, which skips re-validating bytes that hash to what a freeze recorded,
would trust them at every later run. A snapshot takes each file's bytes once; the validator,
the frozen loader and the manifest's hashes (`ResolvedItem.data`) all use those bytes. It also
spares a run's start-up reading each of the corpus's files three times.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trustbench._canonical import read_input_file, sha256_hex
from trustbench.rtb.corpus._jsondoc import Problem, parse_json
from trustbench.rtb.corpus._manifest import MANIFEST_NAME, corpus_file_paths


@dataclass(frozen=True)
class CorpusSnapshot:
    """The bytes of every regular file under a corpus root, `MANIFEST.json` included."""

    root: Path
    """The corpus folder the bytes were read from."""
    data: Mapping[str, bytes]
    """Relative POSIX path -> the file's bytes as read."""

    @classmethod
    def take(cls, root: Path) -> CorpusSnapshot:
        """Read every file under `root` (see `corpus_file_paths`) and the manifest, once.

        Raises:
            InputError: a file could not be read, is not a regular file or is too large (names
                it).
        """
        names = corpus_file_paths(root)
        if (root / MANIFEST_NAME).is_file():
            names.append(MANIFEST_NAME)
        data: dict[str, bytes] = {}
        for rel in names:  # regular files of bounded size only, each named when refused
            data[rel] = read_input_file(root / rel)
        return cls(root=root, data=data)

    def __contains__(self, rel: object) -> bool:
        return rel in self.data

    def sha256(self, rel: str) -> str | None:
        """SHA-256 of the file's bytes; None when there was no such file."""
        data = self.data.get(rel)
        return None if data is None else sha256_hex(data)

    def file_hashes(self) -> dict[str, str]:
        """Relative path -> SHA-256 of every file except the manifest."""
        return {rel: sha256_hex(data) for rel, data in self.data.items() if rel != MANIFEST_NAME}

    def read_json(self, rel: str, problems: list[Problem]) -> Any | None:
        """The file parsed strictly (see `parse_json`); None on a problem or no such file."""
        data = self.data.get(rel)
        if data is None:
            problems.append(
                Problem(file=rel, message="was not there when the corpus was read (just added?)")
            )
            return None
        return parse_json(rel, data, problems)
