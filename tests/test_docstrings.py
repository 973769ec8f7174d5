"""`documented`: the JSON Schemas pydantic's `use_attribute_docstrings` gives, without its cost.

Each case declares the same fields twice, once with pydantic's own extraction (the reference,
read as the class is created) and once with `documented()` (read when a schema is made), and
the two schemas must be identical: descriptions, their places, and pydantic's habit of dropping a
`$ref` sibling that repeats the referenced class's docstring.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from trustbench._docstrings import documented, field_docstrings

REFERENCE = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)
OURS = documented(extra="forbid", frozen=True)


class _RefItem(BaseModel):
    """An item."""

    model_config = REFERENCE
    size: int = 0
    """Its size."""


class _OurItem(BaseModel):
    """An item."""

    model_config = OURS
    size: int = 0
    """Its size."""


class _RefParent(BaseModel):
    model_config = REFERENCE
    kept: str
    """Inherited as is."""
    redeclared: str
    """Replaced below without a docstring."""


class _OurParent(BaseModel):
    model_config = OURS
    kept: str
    """Inherited as is."""
    redeclared: str
    """Replaced below without a docstring."""


class _RefChild(_RefParent):
    redeclared: str  # no docstring: pydantic leaves the field undocumented
    item: _RefItem
    """An item."""
    other: _RefItem
    """Another item, not described like the class."""
    items: list[_RefItem] = Field(default_factory=list)
    """Every item."""
    explicit: int = Field(default=1, description="Given explicitly.")
    """Loses to the explicit description."""
    choice: int | None = None
    """Optional."""
    plain: int = 0  # no docstring


class _OurChild(_OurParent):
    redeclared: str  # no docstring: pydantic leaves the field undocumented
    item: _OurItem
    """An item."""
    other: _OurItem
    """Another item, not described like the class."""
    items: list[_OurItem] = Field(default_factory=list)
    """Every item."""
    explicit: int = Field(default=1, description="Given explicitly.")
    """Loses to the explicit description."""
    choice: int | None = None
    """Optional."""
    plain: int = 0  # no docstring


@dataclass(frozen=True)
class _OurRecord:
    """A stdlib dataclass nested in a model: it carries the config itself."""

    __pydantic_config__ = OURS
    count: int
    """How many."""


@dataclass(frozen=True)
class _RefRecord:
    """A stdlib dataclass nested in a model: it carries the config itself."""

    count: int
    """How many."""


class _RefHolder(BaseModel):
    model_config = REFERENCE
    record: _RefRecord
    """The record."""


class _OurHolder(BaseModel):
    model_config = OURS
    record: _OurRecord
    """The record."""


def _renamed(schema: dict[str, Any]) -> str:
    return repr(schema).replace("_Ref", "_X").replace("_Our", "_X")


@pytest.mark.parametrize(
    ("reference", "ours"),
    [(_RefItem, _OurItem), (_RefChild, _OurChild), (_RefHolder, _OurHolder)],
    ids=["flat", "inherited-nested-explicit", "nested-dataclass"],
)
@pytest.mark.parametrize("mode", ["validation", "serialization"])
def test_schema_descriptions_are_pydantics_own(
    reference: type[BaseModel], ours: type[BaseModel], mode: Any
) -> None:
    expected = reference.model_json_schema(mode=mode)
    assert "description" in repr(expected)  # the reference does document something
    assert _renamed(ours.model_json_schema(mode=mode)) == _renamed(expected)


def test_no_field_holds_a_description_until_a_schema_asks() -> None:
    assert _OurChild.model_fields["kept"].description is None
    assert _OurChild.model_fields["explicit"].description == "Given explicitly."


def test_field_docstrings_match_what_pydantic_stores_on_the_fields() -> None:
    expected = {
        name: field.description
        for name, field in _RefChild.model_fields.items()
        if field.description is not None
    }
    assert field_docstrings(_OurChild) == expected


def test_a_class_defined_in_a_function_is_documented_too() -> None:
    class Local(BaseModel):
        model_config = OURS
        value: int
        """The value."""

    assert Local.model_json_schema()["properties"]["value"]["description"] == "The value."


def test_a_class_without_source_is_left_undocumented_not_refused() -> None:
    made = type("Made", (BaseModel,), {"__annotations__": {"x": int}, "model_config": OURS})
    assert "description" not in made.model_json_schema()["properties"]["x"]


def test_no_trustbench_model_reads_docstrings_at_class_creation() -> None:
    """`use_attribute_docstrings` costs a run about 40 ms on Python 3.11 (issue 35)."""
    source = Path(__file__).parents[1] / "src" / "trustbench"
    offenders = [
        str(path.relative_to(source))
        for path in source.rglob("*.py")
        if "use_attribute_docstrings" in path.read_text(encoding="utf-8")
        and path.name != "_docstrings.py"
    ]
    assert offenders == []
