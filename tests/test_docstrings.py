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
from pydantic._internal._docs_extraction import extract_docstrings_from_cls

from trustbench._docstrings import documented, field_docstrings
from trustbench.core import Evaluability, ExperimentSpec, Manifest
from trustbench.core.gates import GateSpec

REFERENCE = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)
OURS = documented(extra="forbid", frozen=True)


def _family(config: ConfigDict) -> dict[str, type[Any]]:
    """The same classes under `config`: flat, inherited with nested models, a nested dataclass."""

    class Item(BaseModel):
        """An item."""

        model_config = config
        size: int = 0
        """Its size."""

    class Parent(BaseModel):
        model_config = config
        kept: str
        """Inherited as is."""
        redeclared: str
        """Replaced below without a docstring."""

    class Child(Parent):
        redeclared: str  # no docstring: pydantic leaves the field undocumented
        item: Item
        """An item."""
        other: Item
        """Another item, not described like the class."""
        items: list[Item] = Field(default_factory=list)
        """Every item."""
        explicit: int = Field(default=1, description="Given explicitly.")
        """Loses to the explicit description."""
        choice: int | None = None
        """Optional."""
        plain: int = 0  # no docstring
        extra: int = Field(default=0, json_schema_extra={"description": "From the field's extra."})
        """Loses to the field's own schema extra."""

    @dataclass(frozen=True)
    class Record:
        """A stdlib dataclass nested in a model (pydantic applies the holder's config)."""

        count: int
        """How many."""

    if config is OURS:  # ours is read at schema time, from the dataclass's own config
        Record.__pydantic_config__ = OURS  # pyright: ignore[reportAttributeAccessIssue]

    class Holder(BaseModel):
        model_config = config
        record: Record
        """The record."""

    return {"flat": Item, "inherited-nested-explicit": Child, "nested-dataclass": Holder}


REFERENCE_FAMILY = _family(REFERENCE)
OUR_FAMILY = _family(OURS)


@pytest.mark.parametrize("case", list(REFERENCE_FAMILY))
@pytest.mark.parametrize("mode", ["validation", "serialization"])
def test_schema_descriptions_are_pydantics_own(case: str, mode: Any) -> None:
    expected = REFERENCE_FAMILY[case].model_json_schema(mode=mode)
    assert "description" in repr(expected)  # the reference does document something
    assert OUR_FAMILY[case].model_json_schema(mode=mode) == expected


def test_no_field_holds_a_description_until_a_schema_asks() -> None:
    fields = OUR_FAMILY["inherited-nested-explicit"].model_fields
    assert fields["kept"].description is None
    assert fields["explicit"].description == "Given explicitly."


def test_field_docstrings_match_what_pydantic_stores_on_the_fields() -> None:
    reference = REFERENCE_FAMILY["inherited-nested-explicit"]
    expected = {n: f.description for n, f in reference.model_fields.items() if f.description}
    assert field_docstrings(OUR_FAMILY["inherited-nested-explicit"]) == expected


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
    """Pydantic's extraction cost `trustbench report`'s imports 0.1 s on Python 3.11 (issue 55)."""
    source = Path(__file__).parents[1] / "src" / "trustbench"
    offenders = [
        str(path.relative_to(source))
        for path in source.rglob("*.py")
        if "use_attribute_docstrings" in path.read_text(encoding="utf-8")
        and path.name != "_docstrings.py"
    ]
    assert offenders == []


@pytest.mark.parametrize(
    "model", [ExperimentSpec, Manifest, GateSpec, Evaluability], ids=lambda m: m.__name__
)
def test_a_published_models_docstrings_are_those_pydantic_extracts(model: type[Any]) -> None:
    """On real source files (module-level classes, multi-line docstrings), not just the family."""
    own = extract_docstrings_from_cls(model, use_inspect=True)
    assert own  # the model does document its fields
    declared = {name: text for name, text in field_docstrings(model).items() if name in own}
    assert declared == own
