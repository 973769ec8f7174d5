from __future__ import annotations

import pytest

from trustbench.trb.corpus import Trace, generate_split


@pytest.fixture(autouse=True)
def _isolated_model_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> None:
    # Checkpoints from tests never touch the user's cache; one folder per session keeps reuse.
    monkeypatch.setenv("TRUSTBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "trb-cache"))


@pytest.fixture(scope="session")
def eval_traces() -> list[Trace]:
    return generate_split("eval", 30, seed=11)
