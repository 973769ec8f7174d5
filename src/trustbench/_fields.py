"""A model built from the same-named fields of the objects it summarises (one rule, written once).

A trial grade carries its scenario's and its run's ids under the same names, a loaded corpus is
the parts of its validation report, a generated step is its simulated record plus what the
generator adds, and a recorded candidate keeps its spec's name, kind and entry. Spelling each of
those out as `name=source.name` states the same rule again at every constructor; here it is
stated once: a field the caller does not give comes from the first source that declares a field
of that name (a pydantic field or a dataclass field; never a property or method).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

ModelT = TypeVar("ModelT", bound=BaseModel)


def _declared(source: BaseModel | DataclassInstance) -> set[str]:
    """The field names `source`'s type declares."""
    if isinstance(source, BaseModel):
        return set(type(source).model_fields)
    return {field.name for field in dataclasses.fields(source)}


def same_named_fields(
    target: type[BaseModel], *sources: BaseModel | DataclassInstance
) -> dict[str, Any]:
    """Field name -> value for every field of `target` that a source declares under its name.

    The first source that declares a name supplies its value, so put the one that owns a field
    first when two declare it.
    """
    values: dict[str, Any] = {}
    for source in sources:
        declared = _declared(source) - values.keys()
        values.update({n: getattr(source, n) for n in target.model_fields if n in declared})
    return values


def from_same_named(
    target: type[ModelT], *sources: BaseModel | DataclassInstance, **given: Any
) -> ModelT:
    """A `target` from `given`, and each other field from the first source that has it by name.

    `given` wins over every source: a field that a source has under the same name but with
    another meaning (a run's `termination` record, a grade's `termination` status) is given.

    Raises:
        TypeError: A name in `given` is no field of `target` (a misspelt keyword is refused even
            by a model that ignores unknown input).
    """
    unknown = sorted(given.keys() - target.model_fields.keys())
    if unknown:
        raise TypeError(f"{target.__name__} has no field {', '.join(unknown)}")
    return target(**{**same_named_fields(target, *sources), **given})
