"""Record contracts document every field: their docstrings become the JSON Schema."""

import numpy as np
import pytest
from pydantic import BaseModel

from trustbench.core.figures import Figure, Interval
from trustbench.core.gates import GateResult, GateSpec
from trustbench.core.report import ReportPage, to_jsonable
from trustbench.core.stats import (
    BoundedRate,
    HomogeneityResult,
    KappaResult,
    McNemarResult,
    SignFlipResult,
)


def _undocumented(schema: dict) -> list[str]:
    missing = []
    definitions = {"root": schema, **schema.get("$defs", {})}
    for name, definition in definitions.items():
        for field, spec in definition.get("properties", {}).items():
            if not spec.get("description"):
                missing.append(f"{name}.{field}")
    return missing


@pytest.mark.parametrize(
    "model",
    [
        Figure,
        Interval,
        GateSpec,
        GateResult,
        ReportPage,
        BoundedRate,
        KappaResult,
        HomogeneityResult,
        McNemarResult,
        SignFlipResult,
    ],
)
def test_every_public_record_field_has_a_description(model: type[BaseModel]) -> None:
    assert _undocumented(model.model_json_schema()) == []


def test_numpy_values_become_plain_json() -> None:
    assert to_jsonable({"a": np.arange(3), "b": np.float64(0.5), "c": np.bool_(True)}) == {
        "a": [0, 1, 2],
        "b": 0.5,
        "c": True,
    }
