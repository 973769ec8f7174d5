"""Field descriptions from attribute docstrings, read when a JSON Schema is made, not at import.

Every spec, record and contract model documents each field with a docstring under it
(STYLE.md). Those docstrings are the field descriptions of the JSON Schemas we publish and send:
the corpus schema files, a reviewer's structured-output schema, a workflow tool's parameters, the
record schemas. Pydantic's `use_attribute_docstrings` reads them as each class is created; on
Python 3.11 it walks the stack and re-tokenises the class's source, class by class, while most
commands never make a schema. `trustbench report` imports about 85 models: with pydantic's
extraction its imports took 0.55 s of a 1.2 s report, 0.35 s without (issue 55).

`documented(...)` is that config with a `json_schema_extra` hook instead: the first schema that
needs a class's docstrings parses its module's source once, and each field without a description
gets its docstring where pydantic would have put it. The rules are pydantic's: the docstring is
the string literal right under an annotated assignment in the class that declares the field (a
subclass that re-declares a field without one leaves it undocumented), an explicit
`Field(description=...)` wins, and so does a description in the field's own `json_schema_extra`.
`field_docstrings` gives the same descriptions to code that wants them without a schema
(`FieldInfo.description` holds only explicit ones). `tests/test_docstrings.py` keeps the schemas
equal to pydantic's own extraction.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import itertools
import linecache
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.config import JsonDict


def documented(**config: Any) -> ConfigDict:
    """A model config whose JSON Schemas carry the fields' attribute docstrings.

    Args:
        **config: Any other `ConfigDict` settings (`frozen`, `extra`, ...).

    Returns:
        The config, with `json_schema_extra` set to the docstring hook.
    """
    return ConfigDict(json_schema_extra=_describe_fields, **config)


def field_docstrings(cls: type[Any]) -> dict[str, str]:
    """Each field's description: an explicit one, else the docstring of the class declaring it.

    Args:
        cls: A pydantic model or a dataclass.

    Returns:
        Field name to description, for the fields that have one.
    """
    described: dict[str, str] = {}
    for name, explicit in _fields(cls).items():
        if explicit is not None:
            described[name] = explicit
            continue
        owner = next((c for c in cls.__mro__ if name in inspect.get_annotations(c)), None)
        docstring = _class_docstrings(owner).get(name) if owner is not None else None
        if docstring is not None:
            described[name] = docstring
    return described


def _fields(cls: type[Any]) -> dict[str, str | None]:
    """Field name to its explicit description (a dataclass field has none)."""
    if issubclass(cls, BaseModel):
        return {name: field.description for name, field in cls.model_fields.items()}
    if dataclasses.is_dataclass(cls):
        return {field.name: None for field in dataclasses.fields(cls)}
    return {}


def _describe_fields(schema: JsonDict, cls: type[Any]) -> None:
    """`json_schema_extra` hook: put each documented field's docstring on its property.

    Like pydantic, a bare `$ref` gets no description equal to the referenced class's own.
    """
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return
    fields = cls.model_fields if issubclass(cls, BaseModel) else {}
    for name, description in field_docstrings(cls).items():
        field = fields.get(name)
        keys = (name, field.alias, field.serialization_alias) if field else (name,)
        annotation = field.annotation if field else None
        if isinstance(annotation, type) and description == inspect.cleandoc(
            annotation.__doc__ or ""
        ):
            continue  # pydantic drops a `$ref` sibling that repeats the referenced schema
        for key in keys:
            target = properties.get(key) if key else None
            if isinstance(target, dict):
                target.setdefault("description", description)


def _class_docstrings(cls: type[Any]) -> dict[str, str]:
    """The attribute docstrings written in `cls`'s own body ({} when its source is not found)."""
    try:
        filename = inspect.getsourcefile(cls)
    except TypeError:  # a built-in or a class made without source (`create_model`)
        return {}
    if filename is None:
        return {}
    return _module_docstrings(filename).get(cls.__qualname__, {})


@functools.cache
def _module_docstrings(filename: str) -> dict[str, dict[str, str]]:
    """Every class's attribute docstrings in one source file, by qualified name (parsed once)."""
    source = "".join(linecache.getlines(filename))
    try:
        tree = ast.parse(source, filename)
    except SyntaxError:
        return {}
    found: dict[str, dict[str, str]] = {}
    _collect(tree.body, "", found)
    return found


def _collect(body: list[ast.stmt], prefix: str, found: dict[str, dict[str, str]]) -> None:
    """Walk statements, naming classes as `__qualname__` does (functions add `<locals>`)."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            qualname = f"{prefix}{node.name}"
            found[qualname] = _attribute_docstrings(node.body)
            _collect(node.body, f"{qualname}.", found)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            _collect(node.body, f"{prefix}{node.name}.<locals>.", found)
        else:  # a class under `if`, `try` or `with` keeps the enclosing name
            for branch in ("body", "orelse", "finalbody", "handlers"):
                _collect(getattr(node, branch, []), prefix, found)


def _attribute_docstrings(body: list[ast.stmt]) -> dict[str, str]:
    """`name: T` (with or without a value) directly followed by a string literal."""
    docstrings: dict[str, str] = {}
    for statement, following in itertools.pairwise(body):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docstrings[statement.target.id] = inspect.cleandoc(following.value.value)
    return docstrings
