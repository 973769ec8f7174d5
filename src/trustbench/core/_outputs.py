"""Where a command may write: never over a run's evidence, never over a file unasked.

`export-ledger RUN --out RUN/ledger.sqlite` once truncated the ledger it was exporting. Every
command that writes a file or folder named on its command line checks the path here first:

- an empty path (`--out ""`) is refused: it would mean the working folder;
- a run folder's own files are refused: the ledger (with its WAL and shared-memory files), its
  head anchor and the manifest always, even with `--force`, since nothing can rebuild them; the
  report's outputs (`record.json`, `report.html`, `record.intoto.json`) unless `--force`;
- a folder output that is a run folder is refused (it would mix foreign files into the
  evidence), and so is one inside a run folder under the name of one of its files
  (`RUN/ledger.sqlite-wal` as a folder would keep SQLite from writing its log); a subfolder of
  a run (`export-inspect RUN --out RUN/inspect-logs`, as docs/inspect-interop.md shows) holds
  derived outputs beside the evidence, as `report.html` does, and is allowed;
- an existing file is refused unless `--force`.

A run folder is one holding `manifest.json` or `ledger.sqlite`. Paths are resolved first, so a
symbolic link or `..` to a protected file is caught too; outputs are written to a temporary file
and renamed (`write_atomically`), so a symbolic or hard link left where an output goes is
replaced, never written through: the file it points to keeps its contents.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from trustbench.errors import InputError

RUN_MARKERS = ("manifest.json", "ledger.sqlite")
"""A folder holding either is a run folder."""
EVIDENCE = frozenset(
    {"manifest.json", "ledger.sqlite", "ledger.sqlite-wal", "ledger.sqlite-shm", "ledger.head"}
)
"""A run's files nothing may overwrite, `--force` or not."""
RUN_OUTPUTS = frozenset({"record.json", "record.trials.jsonl", "report.html", "record.intoto.json"})
"""A run's files only `report` writes (another command may replace them with `--force`)."""


def is_run_folder(path: Path) -> bool:
    """Whether `path` is a folder holding a run's manifest or ledger."""
    return path.is_dir() and any((path / name).exists() for name in RUN_MARKERS)


def output_path(text: str | Path, option: str = "--out") -> Path:
    """The path an option names, refusing an empty one (it would be the working folder)."""
    if not str(text).strip():
        raise InputError(f"{option} is empty: name a file or folder to write")
    return Path(text)


def check_output_file(path: Path, *, force: bool = False, option: str = "--out") -> Path:
    """Refuse to write the file `path` over evidence or, without `force`, over any file.

    Returns:
        The path, unchanged.

    Raises:
        InputError: naming the path and why (exit 2).
    """
    resolved = path.resolve()
    if resolved.is_dir():
        raise InputError(f"{option} names a folder; name a file", location=str(path))
    if is_run_folder(resolved.parent):
        if resolved.name in EVIDENCE or resolved.name.startswith("ledger.sqlite"):
            raise InputError(
                f"{option} names a run folder's {resolved.name}: that is the run's evidence and "
                "is never overwritten (not even with --force); write elsewhere",
                location=str(path),
            )
        if resolved.name in RUN_OUTPUTS and not force:
            raise InputError(
                f"{option} names the run's own {resolved.name} (written by `trustbench report`); "
                "write elsewhere, or pass --force to replace it",
                location=str(path),
            )
    if resolved.exists() and not force:
        raise InputError(
            f"{option} names an existing file; pass --force to replace it", location=str(path)
        )
    return path


def check_output_folder(path: Path, *, option: str = "--out") -> Path:
    """Refuse a folder output that is a run folder, takes the name of a run's file, or is a file.

    A subfolder of a run folder under another name is allowed: the evidence is the run folder's
    own top-level files, which nothing written below a subfolder can replace.
    """
    resolved = path.resolve()
    if is_run_folder(resolved):
        raise InputError(
            f"{option} names a run folder: writing there would mix other files into its "
            "evidence; name another folder",
            location=str(path),
        )
    return check_new_run_folder(path, option=option)


def check_new_run_folder(path: Path, *, option: str = "--out") -> Path:
    """Refuse a run folder to freeze into that is a file or takes the name of a run's file.

    A folder that is already a run folder is the caller's to judge (a freeze of the same
    manifest is kept, a different one refused by `write_manifest`).
    """
    resolved = path.resolve()
    if resolved.exists() and not resolved.is_dir():
        raise InputError(f"{option} names a file; name a folder", location=str(path))
    name = resolved.name
    if is_run_folder(resolved.parent) and (
        name in EVIDENCE or name in RUN_OUTPUTS or name.startswith("ledger.sqlite")
    ):
        raise InputError(
            f"{option} names a run folder's {name}: a folder there would take the place of the "
            "run's own file; name another folder",
            location=str(path),
        )
    return path


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to a new temporary file beside `path`, then rename it over `path`."""
    with atomic_writer(path) as stream:
        stream.write(data)


@contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """A stream to a new temporary file beside `path`, renamed over `path` when the block ends.

    Renaming replaces the name, not the file: a symbolic link at `path` is replaced rather than
    written through, another name (a hard link) of what was there keeps its contents, and a
    reader never sees half a file. The temporary name is random and created exclusively
    (`O_EXCL | O_NOFOLLOW`), so a link planted under a guessable name is never followed either;
    its mode is an ordinary new file's (0o666 less the umask), unlike `mkstemp`'s 0o600. A block
    that raises leaves `path` as it was and no temporary file behind.
    """
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(temporary, flags, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            yield stream
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
