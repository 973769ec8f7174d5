"""Command-line values of the plain kinds converted without building a pydantic `TypeAdapter`.

typer (from the releases with `typer._coercion`) converts each parameter's value through a
pydantic `TypeAdapter` it builds when the parameter is first parsed. `trustbench run RUN` parses
four that way (the run folder, `--executor`, `--address`, `--limit`): importing typer's adapter
module and building the four adapters is about 40 ms of a command that must start within 1.5x
`import aiohttp` (issue 35), for conversions that are an identity, `int(...)` or `Path(...)`.

So each parameter of a plain kind (`str`, `str | None`, `int` and `int | None` without bounds,
`Path` and `Path | None`) gets a converter that handles the value's plain form here, exactly as
the adapter would (`tests/test_plain_params.py` compares both on each kind) and hands any other
value (`--limit 1_000`, `--limit abc`, an empty path) to typer's own conversion, so typer's
results and error messages stand. A typer without that machinery (older or newer) is left
alone: every value then goes through typer as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_DECIMAL = re.compile(r"0|-?[1-9][0-9]{0,17}")
"""An `int` as the plain decimal digits pydantic reads the same way `int()` does."""
_NOT_PLAIN = object()

_KINDS: dict[Any, str] = {
    bool: "bool",
    str: "str",
    str | None: "str",
    int: "int",
    int | None: "int",
    Path: "path",
    Path | None: "optional path",
}
"""Annotation -> how its plain values convert. `Path` goes through typer's path checks (exists,
file / folder, resolve); `Path | None` never did in typer, and does not here either."""


def _plain(kind: str, value: Any) -> Any:
    """`value` converted as its adapter converts it, or `_NOT_PLAIN` if not in a plain form."""
    if kind == "bool":  # a flag's value; a string (from an environment variable) is typer's
        return value if type(value) is bool else _NOT_PLAIN
    if kind == "str":
        return value if isinstance(value, str) else _NOT_PLAIN
    if kind == "int":
        if type(value) is int:
            return value
        return int(value) if isinstance(value, str) and _DECIMAL.fullmatch(value) else _NOT_PLAIN
    if isinstance(value, Path):
        return value
    if isinstance(value, str) and value and "\x00" not in value:
        return Path(value)
    return _NOT_PLAIN


try:  # typer's value conversion (private, hence guarded); present in typer 0.2x
    from typer._coercion import RuntimeParam, build_runtime_param, resolve_type_descriptor
    from typer._param_types import coerce_cli_path
except ImportError:  # pragma: no cover - another typer: nothing to replace
    _PLAIN: Any = None
else:

    @dataclass(frozen=True)
    class _PlainValue(RuntimeParam):
        """Converts a plain value here; any other through the adapter typer would have built."""

        kind: str

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            plain = _plain(self.kind, value)
            if plain is _NOT_PLAIN:
                descriptor = resolve_type_descriptor(self.annotation, self.parameter_info)
                return build_runtime_param(descriptor)._coerce_value(value, param=param, ctx=ctx)
            if self.kind == "path":  # typer's own checks, on the value its adapter makes
                return coerce_cli_path(
                    plain, self.parameter_info, path_type=Path, param=param, ctx=ctx
                )
            return plain

    _PLAIN = _PlainValue


def _kind(param: Any) -> str | None:
    """The plain kind of a typer parameter, None for any other (or a parameter typer built)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or getattr(param, "_runtime_param", False) is not None:
        return None
    info = descriptor.parameter_info
    try:
        kind = _KINDS.get(descriptor.annotation)
    except TypeError:  # an unhashable annotation: not a plain kind
        return None
    if kind is None or descriptor.is_file or info.parser is not None:
        return None
    if kind == "int" and (info.min is not None or info.max is not None or info.clamp):
        return None
    if kind == "path" and info.path_type not in (None, Path):
        return None
    return kind


def plain_parameters(commands: Iterable[Any]) -> None:
    """Give every plain-kind parameter of `commands` (and their built sub-commands) the converter.

    Args:
        commands: click commands built by typer; a group's `commands` are walked when they are
            a plain dict (a lazy table is not: its groups are handled as they are built).
    """
    if _PLAIN is None:  # pragma: no cover - another typer
        return
    for command in commands:
        for param in getattr(command, "params", ()):
            _convert_plainly(param)
        _help_option_too(command)
        children = getattr(command, "commands", None)
        if type(children) is dict:
            plain_parameters(children.values())


def _convert_plainly(param: Any) -> None:
    kind = _kind(param)
    if kind is not None and _PLAIN is not None:
        descriptor = param.type_descriptor
        param._runtime_param = _PLAIN(
            parameter_info=descriptor.parameter_info, annotation=descriptor.annotation, kind=kind
        )


def _help_option_too(command: Any) -> None:
    """The `--help` flag, which click makes when a command is first parsed, converts plainly too.

    Its value is parsed on every invocation (None when not given, which typer still converts).
    """
    made = getattr(command, "get_help_option", None)
    if made is None or getattr(made, "plain", False):
        return

    def get_help_option(ctx: Any) -> Any:
        option = made(ctx)
        if option is not None:
            _convert_plainly(option)
        return option

    get_help_option.plain = True  # type: ignore[attr-defined]
    setattr(command, "get_help_option", get_help_option)  # noqa: B010
