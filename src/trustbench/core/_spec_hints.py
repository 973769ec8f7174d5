"""Spec validation errors as one line a user can act on: where, what, and the likely fix.

A misspelt key (`transport_max_retires`) is refused by the strict spec models as an extra
input; the message then names the closest key the table accepts, so the fix is one look away.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from trustbench.errors import InputError, did_you_mean


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation can hold (through Optional, unions, lists, dicts, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) in (Union, types.UnionType) or get_args(annotation):
        return [model for arg in get_args(annotation) for model in _models_in(arg)]
    return []


def accepted_keys(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys the table at `loc` accepts (`loc`: a validation error's, ending in the bad key).

    Every field name and alias of the model(s) that table is validated as.
    """
    models = [model]
    for part in loc[:-1]:
        if isinstance(part, int):
            continue  # a list index: the same models
        fields = [m.model_fields[part] for m in models if part in m.model_fields]
        if not fields:  # a dict key (a free-form table) or a union tag: keep the models
            continue
        models = [found for field in fields for found in _models_in(field.annotation)]
    names: list[str] = []
    for found in models:
        for name, field in found.model_fields.items():
            names += [name] + ([field.alias] if field.alias else [])
    return names


def spec_error(
    model: type[BaseModel], errors: Sequence[ErrorDetails], *, source: str
) -> InputError:
    """The `InputError` for a spec's validation errors: file#/json/pointer: message.

    A misspelt key shows as two errors (the key it should be is missing, the one written is
    extra); the extra one, with the key it is close to, is the one reported, since it says the
    fix. Otherwise the first error is.

    Args:
        model: The model the data was validated as (the spec).
        errors: Pydantic's errors, in its order.
        source: The file name shown in the message.
    """
    chosen, message = errors[0], errors[0]["msg"]
    for error in errors:
        loc = tuple(error["loc"])
        if error["type"] != "extra_forbidden" or not loc:
            continue
        hint = did_you_mean(loc[-1], accepted_keys(model, loc))
        if hint:
            chosen, message = error, error["msg"] + hint
            break
    pointer = "/" + "/".join(str(part) for part in chosen["loc"])
    return InputError(message, location=f"{source}#{pointer}")
