"""Where a command may write: never over a run's evidence, a file unasked, or a device.

`export-ledger RUN --out RUN/ledger.sqlite` once truncated the ledger it was exporting, and
`--out /dev/stdout` once renamed a regular file over `/dev/stdout` for every process on the host.
Every command that writes a file or folder named on its command line checks the path here first:

- an empty path (`--out ""`) is refused: it would mean the working folder;
- a run folder's own files are refused, even with `--force`: the ledger (with its WAL and
  shared-memory files), its head anchor, its lock, the manifest and the report's outputs
  (`record.json`, `record.trials.jsonl`, `report.html`, `record.intoto.json`), since a foreign
  file there makes `verify`, `report` and `run` refuse the run (only `report` writes those);
- a folder output that is a run folder is refused (it would mix foreign files into the
  evidence), and so is one inside a run folder under the name of one of its files
  (`RUN/ledger.sqlite-wal` as a folder would keep SQLite from writing its log); a subfolder of
  a run (`export-inspect RUN --out RUN/inspect-logs`, as docs/inspect-interop.md shows) holds
  derived outputs beside the evidence, as `report.html` does, and is allowed;
- a UNIX socket file is refused, `--force` or not, before any work: it cannot be opened for
  writing, and replacing it would take it away from the server listening there;
- a stream (`-` for standard output, a terminal, a FIFO, `/dev/full`, a
  `/proc/self/fd/N` entry or a link to one such as `/dev/stdout`) is written through, never
  replaced, `--force` or not (`is_stream`, `output_writer`);
- any other existing file is refused unless `--force`.

A run folder is one holding `manifest.json` or `ledger.sqlite`. Paths are resolved first, so a
symbolic link or `..` to a protected file is caught too; a regular file is written to a temporary
file and renamed (`write_atomically`), so a symbolic or hard link left where an output goes is
replaced, never written through: the file it points to keeps its contents.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from trustbench.errors import InputError

RUN_MARKERS = ("manifest.json", "ledger.sqlite")
"""A folder holding either is a run folder."""
RUN_OUTPUTS = frozenset({"record.json", "record.trials.jsonl", "report.html", "record.intoto.json"})
"""A run's files only `report` writes."""
EVIDENCE = frozenset(
    {
        "manifest.json",
        "ledger.sqlite",
        "ledger.sqlite-wal",
        "ledger.sqlite-shm",
        "ledger.head",
        ".run.lock",
        *RUN_OUTPUTS,
    }
)
"""A run's files no command's output may take the place of, `--force` or not.

`record.intoto.json` pins the others: one replaced by an export leaves `verify`, `report` and
`run` refusing the run until the file is moved, so the report's outputs are evidence too.
"""
STANDARD_OUTPUT = "-"
"""The output name that means standard output (`--out -`)."""
_DESCRIPTOR_ENTRY = re.compile(r"/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd/\d+")
"""A process's open descriptor as a path (what `/dev/stdout` and `/dev/fd/N` lead to)."""
_MAX_LINKS = 40
"""Links followed before giving up (the kernel's own limit for one path)."""


def is_run_folder(path: Path) -> bool:
    """Whether `path` is a folder holding a run's manifest or ledger."""
    return path.is_dir() and any((path / name).exists() for name in RUN_MARKERS)


def output_path(text: str | Path, option: str = "--out") -> Path:
    """The path an option names, refusing an empty one (it would be the working folder)."""
    if not str(text).strip():
        raise InputError(f"{option} is empty: name a file or folder to write")
    return Path(text)


def check_output_file(
    path: Path, *, force: bool = False, option: str = "--out", streams: bool = True
) -> Path:
    """Refuse to write the file `path` over evidence or, without `force`, over any file.

    A stream (`is_stream`) is accepted without `force`, since writing to it replaces nothing;
    a command whose output must be a file it can reread or chmod (a key) passes `streams=False`.

    Returns:
        The path, unchanged.

    Raises:
        InputError: naming the path and why (exit 2).
    """
    if str(path) != STANDARD_OUTPUT:
        _refuse_evidence(path, option)
        _refuse_socket(path, option)
    if is_stream(path):
        if not streams:
            raise InputError(
                f"{option} names standard output, a device or a FIFO; name a file",
                location=str(path),
            )
        return path
    resolved = path.resolve()
    if resolved.exists() and not force:
        raise InputError(
            f"{option} names an existing file; pass --force to replace it", location=str(path)
        )
    return path


def _run_file_named(resolved: Path) -> str | None:
    """The name of the run folder's own file that `resolved` would take the place of, if any."""
    name = resolved.name
    if is_run_folder(resolved.parent) and (name in EVIDENCE or name.startswith("ledger.sqlite")):
        return name
    return None


def _refuse_evidence(path: Path, option: str) -> None:
    """Refuse a folder, and a run folder's own file (`EVIDENCE`) whatever `--force` says."""
    resolved = path.resolve()
    if resolved.is_dir():
        raise InputError(f"{option} names a folder; name a file", location=str(path))
    if name := _run_file_named(resolved):
        raise InputError(
            f"{option} names a run folder's {name}: that is the run's evidence and is never "
            "overwritten (not even with --force); write elsewhere",
            location=str(path),
        )


def _refuse_socket(path: Path, option: str) -> None:
    """Refuse a socket (a UNIX socket file, a link to one, a socket descriptor), `--force` or not.

    `open` fails on a socket file (ENXIO), so it cannot be streamed to, and renaming a file over
    it would cut its server off from every client that connects by the name. Refused here,
    before a command does its work, rather than when the output is opened at the end.
    """
    try:
        mode = path.stat().st_mode
    except OSError:  # nothing there (or a dangling link): a new file
        return
    if stat.S_ISSOCK(mode):
        raise InputError(
            f"{option} names a socket: it cannot be written as a file and is never "
            "replaced (not even with --force); name a file, a FIFO or - for standard output",
            location=str(path),
        )


def is_stream(path: Path) -> bool:
    """Whether `path` is written through as a stream rather than replaced by a new file.

    True for `-` (standard output), for anything that exists and is neither a regular file nor
    a folder (a terminal, `/dev/full`, a FIFO; a socket, refused by `check_output_file`), and
    for a process's descriptor entry
    (`/proc/self/fd/N`, or a link leading to one such as `/dev/stdout`) whatever it points at:
    renaming a file over such a name would take the device or descriptor away from every other
    process that uses the name, and would send nothing to the reader the user meant.
    """
    if str(path) == STANDARD_OUTPUT:
        return True
    try:
        mode = path.stat().st_mode
    except OSError:  # nothing there (or a dangling link): a new file
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)) or _leads_to_a_descriptor(path)


def is_standard_output(path: Path) -> bool:
    """Whether writing `path` writes into this process's standard output (`-`, `/dev/stdout`).

    A command whose output goes there says everything else on standard error, so a pipe
    receives the output alone.
    """
    if str(path) == STANDARD_OUTPUT:
        return True
    try:
        return os.path.samestat(path.stat(), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError):  # nothing there, or no descriptor behind sys.stdout
        return False


def _leads_to_a_descriptor(path: Path) -> bool:
    """Whether `path`, or a symbolic link it leads through, is a `/proc/PID/fd/N` entry.

    Followed link by link (not `resolve`): a descriptor's own link names its target
    (`pipe:[123]`, or the regular file a shell redirected stdout to), which would hide the
    descriptor it came through.
    """
    current = Path(os.path.abspath(path))
    for _ in range(_MAX_LINKS):
        current = Path(os.path.realpath(current.parent)) / current.name
        if _DESCRIPTOR_ENTRY.fullmatch(str(current)):
            return True
        if not current.is_symlink():
            return False
        current = current.parent / os.readlink(current)
    return False


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
    if name := _run_file_named(resolved):
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


def write_output(path: Path, data: bytes) -> None:
    """Write `data` to the output a user named (`output_writer`: streamed or replaced)."""
    with output_writer(path) as stream:
        stream.write(data)


@contextmanager
def output_writer(path: Path) -> Iterator[BinaryIO]:
    """A stream to the output file a user named, checked first by `check_output_file`.

    A stream (`is_stream`) is opened for writing (appending, so a descriptor entry that leads to a
    regular file is continued, not truncated; `-` is standard output) and never replaced: no
    temporary file, no rename. Anything else is a regular file or a new one: `atomic_writer`.

    Raises:
        InputError: the stream cannot be opened or written (a socket, `/dev/full`, a closed pipe).
    """
    if not is_stream(path):
        with atomic_writer(path) as stream:
            yield stream
        return
    try:
        if str(path) == STANDARD_OUTPUT:
            yield sys.stdout.buffer
            sys.stdout.buffer.flush()
            return
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY)
        with os.fdopen(descriptor, "wb") as stream:
            yield stream
    except OSError as error:
        raise InputError(
            f"cannot write the output there ({error.strerror or error})", location=str(path)
        ) from None
