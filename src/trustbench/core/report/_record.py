"""`record.json`: the machine-readable result, written stably so two runs diff cleanly.

Keys are sorted, indentation fixed, non-ASCII kept, and NaN or infinity refused (they are not
JSON, and a NaN in a release record reads as a number when it means "undefined"; undefined
values are `null` with a reason beside them). The file is written to a temporary name and
renamed, so a crash never leaves half a record.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from enum import Enum
from json.encoder import encode_basestring
from pathlib import Path, PurePath
from typing import IO, Any

from pydantic import BaseModel

from trustbench.core._outputs import atomic_writer, write_atomically
from trustbench.core.gates import GateResult, any_failed
from trustbench.errors import CheckFailed, InputError

JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]


def _pointer_token(key: str | int) -> str:
    # RFC 6901: "~" -> "~0", "/" -> "~1".
    return str(key).replace("~", "~0").replace("/", "~1")


class _Unwritable(Exception):
    """A value JSON cannot represent; `path` collects the keys from it up to the top."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str | int] = []


def to_jsonable(value: Any, pointer: str = "") -> JsonValue:
    """Convert models, enums, paths, tuples and numpy scalars to plain JSON values.

    Args:
        value: What to convert.
        pointer: JSON pointer of `value` in the record, for error messages.

    Returns:
        A value `json.dumps` accepts without a custom encoder.

    Raises:
        InputError: A float is NaN or infinite, a key is not a string, or a type is unknown;
            the message names the JSON pointer.
    """
    try:
        return _plain(value)
    except _Unwritable as problem:
        where = pointer + "".join(f"/{_pointer_token(key)}" for key in reversed(problem.path))
        raise InputError(problem.message, location=where or "/") from None


def _plain(value: Any) -> JsonValue:
    # Exact built-in types first: a record holds mostly these (e.g. one dict per trial), and
    # the JSON pointer of a value is only assembled when something is wrong, as the error
    # travels up. Both keep a 100,000-trial record from costing seconds here.
    kind = type(value)
    if kind is str or kind is bool or value is None or kind is int:
        return value  # type: ignore[no-any-return]
    if kind is float:
        if not math.isfinite(value):
            raise _Unwritable(f"non-finite number {value!r}; use null with a reason")
        return value  # type: ignore[no-any-return]
    if kind is dict:
        return _plain_mapping(value)
    if kind is list or kind is tuple:
        return _plain_items(value)
    return _plain_other(value)


def _plain_mapping(value: Mapping[Any, Any]) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise _Unwritable(f"object key {key!r} is not a string")
        try:
            out[key] = _plain(item)
        except _Unwritable as problem:
            problem.path.append(key)
            raise
    return out


def _plain_items(items: Any) -> list[JsonValue]:
    out: list[JsonValue] = []
    for index, item in enumerate(items):
        try:
            out.append(_plain(item))
        except _Unwritable as problem:
            problem.path.append(index)
            raise
    return out


def _plain_other(value: Any) -> JsonValue:
    if isinstance(value, BaseModel):
        return _plain(value.model_dump(mode="json"))
    if isinstance(value, Enum):
        return _plain(value.value)
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _plain(float(value))
    # An array exists only once numpy is loaded: look it up rather than import numpy (0.15 s)
    # for every command that imports the report package.
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.ndarray):
        return _plain(value.tolist())
    if isinstance(value, PurePath):
        return value.as_posix()
    if isinstance(value, Mapping):
        return _plain_mapping(value)
    if isinstance(value, Sequence | set | frozenset) and not isinstance(value, bytes):
        return _plain_items(sorted(value) if isinstance(value, set | frozenset) else value)
    item = getattr(value, "item", None)  # numpy scalar
    if callable(item):
        return _plain(item())
    raise _Unwritable(f"cannot write {type(value).__name__} to JSON")


def record_json_text(record: Mapping[str, Any]) -> str:
    """The stable text of a record: sorted keys, two-space indent, trailing newline.

    Byte-identical to `json.dumps(..., sort_keys=True, indent=2, ensure_ascii=False)` (tested),
    written by `_indented` because `json` only has a C encoder for unindented output: its
    pure-Python indenting encoder took ~4 s for a record with 100,000 trial rows.
    """
    parts: list[str] = []
    _indented(to_jsonable(record), parts, "\n")
    parts.append("\n")
    return "".join(parts)


def _indented(value: JsonValue, parts: list[str], newline: str) -> None:
    """Append `value` as `json.dumps(indent=2, sort_keys=True)` writes it at this depth."""
    if isinstance(value, str):
        parts.append(encode_basestring(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, int):
        parts.append(int.__repr__(value))
    elif isinstance(value, float):
        parts.append(float.__repr__(value))
    elif isinstance(value, dict):
        if not value:
            parts.append("{}")
            return
        inner = newline + "  "
        separator = "{" + inner
        for key in sorted(value):
            parts.append(separator)
            parts.append(encode_basestring(key))
            parts.append(": ")
            _indented(value[key], parts, inner)
            separator = "," + inner
        parts.append(newline + "}")
    else:
        if not value:
            parts.append("[]")
            return
        inner = newline + "  "
        separator = "[" + inner
        for item in value:
            parts.append(separator)
            _indented(item, parts, inner)
            separator = "," + inner
        parts.append(newline + "]")


def write_record_json(path: Path | str, record: Mapping[str, Any]) -> Path:
    """Write `record.json` atomically (temporary file in the same folder, then rename).

    Args:
        path: Destination file.
        record: The record; pydantic models (figures, gate results) may appear anywhere in it.

    Returns:
        The path written.

    Raises:
        InputError: The record holds a value JSON cannot represent (message names the file and
            JSON pointer).
    """
    target = Path(path)
    try:
        text = record_json_text(record)
    except InputError as problem:
        raise InputError(problem.message, location=f"{target}#{problem.location}") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(target, text.encode("utf-8"))  # replaces a link there, never follows it
    return target


def gates_record(results: Sequence[GateResult]) -> dict[str, JsonValue]:
    """The `gates` section of a record: every result plus counts and the blocking verdict.

    Args:
        results: Gate results from `evaluate_gates`.

    Returns:
        `{"results": [...], "passed": n, "failed": n, "not_evaluable": n, "blocking": bool}`,
        where `blocking` is `any_failed(results)` (not-evaluable gates block; informational
        gates, `blocking = false`, never do).
    """
    counts = {status: 0 for status in ("passed", "failed", "not_evaluable")}
    for result in results:
        counts[result.status] += 1
    return {
        "results": [to_jsonable(result) for result in results],
        **counts,
        "blocking": any_failed(results),
    }


# ------------------------------------------------------------------------------------------------
# `record.trials.jsonl`: a report's per-trial rows, one JSON object a line, beside `record.json`.
#
# `record.json` holds what a reader or a release check needs (figures, gates, verdicts, counts) and
# stays small however long the run: at 50,000 reviewer trials the rows made it 85 MB, and a parser
# had to hold them all to read one gate (issue 30). The rows go here instead, written as they come
# (a track may hand an iterator), each line `{"part": PART, ...row}` with sorted keys, `PART` being
# the track's section name (`review`, `control`, `workflow`). `record.json` names the file with its
# row counts and SHA-256 (`trial_rows`), so the signed record commits to the rows too.

TRIAL_ROWS_FILE = "record.trials.jsonl"
"""File name of the per-trial rows, in the run folder beside `record.json`."""

_TRIAL_MARK = 7**40 + 1
"""A trial index no row holds, written where `TrialRowSpool.add_trials` puts each index."""
_TRIAL_MARK_BYTES = b"%d" % _TRIAL_MARK


class TrialRowSpool:
    """One part's rows, encoded as they are made and kept in a temporary file until written.

    A track that counts its trials in one pass can encode each trial's row in that same pass
    (`add`) instead of handing `write_trial_rows` an iterator that makes every trial again: at a
    million reviewer trials, making the rows twice was a fifth of `report` (issue 30).
    `write_trial_rows` copies the encoded lines as they are (the bytes `_line` gives, so the
    file is the same as from an iterator of the same rows); iterating yields the rows back as
    dicts, for any other reader. The temporary file is gone when closed or the process ends.
    """

    def __init__(self, part: str) -> None:
        self.part = part
        self.count = 0
        self._file: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed by `close`)

    def add(self, row: Mapping[str, Any]) -> None:
        """Encode one row (as `write_trial_rows` would) and keep it.

        Raises:
            InputError: A value JSON cannot represent (names the part and row).
        """
        self._file.write(_line(self.part, row, self._pointer()))
        self.count += 1

    def add_trials(self, row: Mapping[str, Any], count: int) -> None:
        """Add `count` rows equal to `row` but for their `trial`: 0, 1, ... `count` - 1.

        The row is encoded once, with a marker in place of the trial index, and each line is
        that encoding with the index put back: the same bytes as encoding every row (checked:
        the marker must occur exactly once, or every row is encoded in full).
        """
        text = _line(self.part, {**row, "trial": _TRIAL_MARK}, self._pointer())
        head, mark, tail = text.partition(_TRIAL_MARK_BYTES)
        if not mark or _TRIAL_MARK_BYTES in tail:
            for trial in range(count):
                self.add({**row, "trial": trial})
            return
        self._file.writelines(b"%b%d%b" % (head, trial, tail) for trial in range(count))
        self.count += count

    def _pointer(self) -> str:
        return f"{TRIAL_ROWS_FILE}#{self.part}/{self.count}"

    def chunks(self) -> Iterator[bytes]:
        """The encoded lines, in order, in large chunks."""
        self._file.flush()
        self._file.seek(0)
        while chunk := self._file.read(1 << 20):
            yield chunk

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self._file.flush()
        self._file.seek(0)
        for line in self._file:
            row = json.loads(line)
            del row["part"]
            yield row

    def close(self) -> None:
        """Delete the temporary file."""
        self._file.close()


def write_trial_rows(
    path: Path | str, parts: Mapping[str, Iterable[Mapping[str, Any]]]
) -> dict[str, Any]:
    """Write every part's rows to `path` atomically, one line per row; return the summary.

    Args:
        path: Destination (normally `RUN_DIR/record.trials.jsonl`).
        parts: Part name -> its rows (any iterable: rows are converted and written one at a
            time, never all held as text; a `TrialRowSpool` of that part is copied as encoded).

    Returns:
        `{"file": name, "rows": {part: count}, "sha256": hex digest of the file}` for
        `record.json`.

    Raises:
        InputError: A row holds a value JSON cannot represent (names the file, part and row).
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    counts: dict[str, int] = {}
    with atomic_writer(target) as stream:
        for part, rows in parts.items():
            counts[part] = 0
            if isinstance(rows, TrialRowSpool) and rows.part == part:
                for chunk in rows.chunks():
                    stream.write(chunk)
                    digest.update(chunk)
                counts[part] = rows.count
                continue
            for row in rows:
                line = _line(part, row, f"{target}#{part}/{counts[part]}")
                stream.write(line)
                digest.update(line)
                counts[part] += 1
    return {"file": target.name, "rows": counts, "sha256": digest.hexdigest()}


def _line(part: str, row: Mapping[str, Any], pointer: str) -> bytes:
    """One row as a line, by `json`'s C encoder.

    Rows are mostly plain JSON values, which the encoder takes as they are; only a value it
    cannot take (a model, an enum, NaN) goes through `to_jsonable`, which converts it or names
    it by JSON pointer, instead of every row being copied through `to_jsonable` first.
    """
    try:
        text = _ENCODE({"part": part, **row})
    except (TypeError, ValueError):
        converted = to_jsonable(row, pointer)  # raises InputError naming the value's pointer
        try:
            text = json.dumps(
                {"part": part, **converted},  # type: ignore[dict-item]
                sort_keys=True,
                ensure_ascii=False,
                allow_nan=False,
            )
        except ValueError as error:
            raise InputError(f"trial row is not JSON: {error}", location=pointer) from None
    return text.encode("utf-8") + b"\n"


def _unusual(value: Any) -> Any:
    """A value the C encoder cannot write (a model, an enum, a path): its plain JSON form."""
    return to_jsonable(value)


_ENCODE = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, allow_nan=False, default=_unusual
).encode
"""`json.dumps` with these options, without making an encoder per row (as `dumps` does)."""


def iter_trial_rows(run_dir: Path, part: str | None = None) -> Iterator[dict[str, Any]]:
    """Yield the rows of `run_dir`'s trial-rows file (of one part, or all with their `part`).

    Reads one line at a time, so a million-row file is never held whole.

    Raises:
        CheckFailed: The file is missing (run `trustbench report` first) or a line is not a
            JSON object; the message names the file and line.
    """
    path = Path(run_dir) / TRIAL_ROWS_FILE
    try:
        stream = path.open(encoding="utf-8")
    except OSError as error:
        raise CheckFailed(
            f"no per-trial rows ({error.strerror}): run `trustbench report` first",
            location=str(path),
        ) from None
    with stream:
        for number, text in enumerate(stream, start=1):
            try:
                row = json.loads(text)
            except ValueError as error:
                message = f"line {number} is not JSON: {error}"
                raise CheckFailed(message, location=str(path)) from None
            if not isinstance(row, dict) or not isinstance(row.get("part"), str):
                raise CheckFailed(f"line {number} is not a trial row", location=str(path))
            if part is None or row.pop("part") == part:
                yield row


def read_trial_rows(run_dir: Path, part: str) -> list[dict[str, Any]]:
    """Every row of one part (`review`, `control`, `workflow`) as a list, `part` key removed."""
    return list(iter_trial_rows(run_dir, part))


def trial_rows_problems(run_dir: Path, record: Mapping[str, Any]) -> list[str]:
    """Why `run_dir`'s trial-rows file is not the one `record` (its `record.json`) names.

    The record commits to the rows by SHA-256: a row edited, added or dropped after the report
    changes the digest. Empty when they match.
    """
    named = record.get("trial_rows")
    if not isinstance(named, Mapping) or not isinstance(named.get("sha256"), str):
        return ["record.json names no per-trial rows file (trial_rows.sha256)"]
    path = Path(run_dir) / TRIAL_ROWS_FILE
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
    except OSError as error:
        return [f"{TRIAL_ROWS_FILE} is unreadable: {error.strerror}"]
    if digest.hexdigest() != named["sha256"]:
        return [f"{TRIAL_ROWS_FILE} does not match the sha256 record.json names (edited since)"]
    return []
