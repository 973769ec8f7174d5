from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from trustbench._docstrings import field_docstrings
from trustbench.core import AnalysisSpec, CandidateSpec, CorpusSpec, ExperimentSpec, RetryPolicy
from trustbench.core.gates import GateSpec
from trustbench.core.ledger._store import TABLE_COLUMNS
from trustbench.providers import PriceSpec

DOC = (Path(__file__).parents[2] / "docs" / "experiment-spec.md").read_text()
MODELS = [ExperimentSpec, CorpusSpec, CandidateSpec, PriceSpec, RetryPolicy, AnalysisSpec, GateSpec]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_spec_reference_documents_every_field(model: type[BaseModel]) -> None:
    described = field_docstrings(model)
    for name in model.model_fields:
        assert f"`{name}" in DOC or f".{name}" in DOC or f"{name}`" in DOC, name
        assert described.get(name), f"{model.__name__}.{name} has no docstring"


def test_spec_reference_documents_every_ledger_column() -> None:
    for table, columns in TABLE_COLUMNS.items():
        assert f"`{table}`" in DOC
        for column in columns:
            assert column in ("id", "seq") or f"`{column}`" in DOC, f"{table}.{column}"
