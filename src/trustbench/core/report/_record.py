"""`record.json`: the machine-readable result, written stably so two runs diff cleanly.

Keys are sorted, indentation fixed, non-ASCII kept, and NaN or infinity refused (they are not
JSON, and a NaN in a release record reads as a number when it means "undefined"; undefined
values are `null` with a reason beside them). The file is written to a temporary name and
renamed, so a crash never leaves half a record.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from enum import Enum
from json.encoder import encode_basestring
from pathlib import Path, PurePath
from typing import Any

from pydantic import BaseModel

from trustbench.core._outputs import write_atomically
from trustbench.core.gates import GateResult, any_failed
from trustbench.errors import InputError

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
