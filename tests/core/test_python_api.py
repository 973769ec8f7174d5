"""Running an experiment from Python: a spec mapping or file, sync and async, in a running loop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from trustbench.core import read_ledger, run_spec, run_spec_async, verify_run
from trustbench.errors import InputError


def _spec(*reviewers: str) -> dict[str, Any]:
    return {
        "suite": "rtb",
        "track": "review",
        "description": "python api",
        "trials_per_case": 1,
        "concurrency": 4,
        "timeout_s": 10.0,
        "order_seed": 7,
        "corpus": {"builtin": "v0.1"},
        "retry": {"transport_max_retries": 0, "candidate_resample": 0},
        "candidates": [
            {
                "name": name,
                "kind": "inprocess",
                "entry": "trustbench.rtb.review.reviewers:chat_responder",
                "settings": {"reviewer": name},
            }
            for name in reviewers
        ],
    }


def test_a_spec_mapping_is_frozen_as_spec_json_run_and_reported(tmp_path: Path) -> None:
    result = run_spec(_spec("reference-policy"), tmp_path / "run")
    assert json.loads((tmp_path / "run" / "spec.json").read_text()) == _spec("reference-policy")
    assert result.manifest.spec_file == "spec.json"
    assert result.run.completed == 60
    assert result.report.record_path.is_file()
    assert verify_run(tmp_path / "run").ok


def test_running_the_same_spec_again_resumes_instead_of_re_running(tmp_path: Path) -> None:
    run_spec(_spec("always-deny"), tmp_path / "run")
    again = run_spec(_spec("always-deny"), tmp_path / "run")
    assert again.run.completed == 0 and again.run.finished_before == 60
    assert len(read_ledger(tmp_path / "run").trials) == 60


def test_a_different_spec_in_the_same_folder_is_refused(tmp_path: Path) -> None:
    run_spec(_spec("always-deny"), tmp_path / "run")
    frozen = (tmp_path / "run" / "spec.json").read_text()
    with pytest.raises(InputError, match="different frozen manifest"):
        run_spec(_spec("always-permit"), tmp_path / "run")
    assert (tmp_path / "run" / "spec.json").read_text() == frozen


def test_the_async_form_runs_on_the_callers_loop(tmp_path: Path) -> None:
    async def main() -> int:
        result = await run_spec_async(_spec("always-permit"), tmp_path / "run")
        return result.run.completed

    assert asyncio.run(main()) == 60


def test_the_sync_form_works_inside_a_running_loop_as_in_jupyter(tmp_path: Path) -> None:
    async def cell() -> int:
        return run_spec(_spec("reference-policy"), tmp_path / "run").run.completed

    assert asyncio.run(cell()) == 60


def test_a_spec_file_works(tmp_path: Path) -> None:
    spec = tmp_path / "exp.json"
    spec.write_text(json.dumps(_spec("reference-policy")))
    assert run_spec(spec, tmp_path / "run").run.completed == 60


def test_an_invalid_spec_mapping_names_the_field(tmp_path: Path) -> None:
    bad = {**_spec("reference-policy"), "trials_per_case": 0}
    with pytest.raises(InputError, match="trials_per_case"):
        run_spec(bad, tmp_path / "run")
