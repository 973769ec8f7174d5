"""`record.json`: the machine-readable result, written stably so two runs diff cleanly.

Keys are sorted, indentation fixed, non-ASCII kept, and NaN or infinity refused (they are not
JSON, and a NaN in a release record reads as a number when it means "undefined"; undefined
values are `null` with a reason beside them). The file is written to a temporary name and
renamed, so a crash never leaves half a record.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from enum import Enum
from pathlib import Path, PurePath
from typing import Any

import numpy as np
from pydantic import BaseModel

from trustbench.core.gates import GateResult, any_failed
from trustbench.errors import InputError

JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]


def _pointer_token(key: str | int) -> str:
    # RFC 6901: "~" -> "~0", "/" -> "~1".
    return str(key).replace("~", "~0").replace("/", "~1")


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
    if isinstance(value, BaseModel):
        return to_jsonable(value.model_dump(mode="json"), pointer)
    if isinstance(value, Enum):
        return to_jsonable(value.value, pointer)
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(
                f"non-finite number {value!r}; use null with a reason", location=pointer or "/"
            )
        return value
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist(), pointer)
    if isinstance(value, PurePath):
        return value.as_posix()
    if isinstance(value, Mapping):
        out: dict[str, JsonValue] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InputError(f"object key {key!r} is not a string", location=pointer or "/")
            out[key] = to_jsonable(item, f"{pointer}/{_pointer_token(key)}")
        return out
    if isinstance(value, Sequence | set | frozenset) and not isinstance(value, bytes):
        items = sorted(value) if isinstance(value, set | frozenset) else value
        return [to_jsonable(item, f"{pointer}/{i}") for i, item in enumerate(items)]
    item = getattr(value, "item", None)  # numpy scalar
    if callable(item):
        return to_jsonable(item(), pointer)
    raise InputError(f"cannot write {type(value).__name__} to JSON", location=pointer or "/")


def record_json_text(record: Mapping[str, Any]) -> str:
    """The stable text of a record: sorted keys, two-space indent, trailing newline."""
    plain = to_jsonable(record)
    return json.dumps(plain, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


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
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def gates_record(results: Sequence[GateResult]) -> dict[str, JsonValue]:
    """The `gates` section of a record: every result plus counts and the blocking verdict.

    Args:
        results: Gate results from `evaluate_gates`.

    Returns:
        `{"results": [...], "passed": n, "failed": n, "not_evaluable": n, "blocking": bool}`,
        where `blocking` is `any_failed(results)` (not-evaluable gates block).
    """
    counts = {status: 0 for status in ("passed", "failed", "not_evaluable")}
    for result in results:
        counts[result.status] += 1
    return {
        "results": [to_jsonable(result) for result in results],
        **counts,
        "blocking": any_failed(results),
    }
