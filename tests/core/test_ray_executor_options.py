"""`run` option checks that need no Ray installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from trustbench.core import run_experiment
from trustbench.errors import InputError


def test_unknown_executor_and_address_without_ray_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown executor"):
        run_experiment(tmp_path, executor="threads")
    with pytest.raises(InputError, match="--address"):
        run_experiment(tmp_path, address="auto")
