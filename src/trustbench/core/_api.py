"""Run an experiment from Python: freeze, run and report in one call, sync or async.

The command line does the same in three steps (`freeze`, `run`, `report`). From Python the spec
can be a file or a mapping (written to the run folder as `spec.json`, so the frozen manifest
still hashes the exact spec that ran). `run_spec` blocks; when it is called where an event loop
is already running (a Jupyter cell, an async web handler), it runs the experiment on a worker
thread with its own loop instead of failing. `run_spec_async` is the awaitable form: trials run
on the caller's loop and the CPU-bound freeze and report steps on a worker thread.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trustbench.core._report_run import ReportResult, report_run
from trustbench.core._runner import (
    NoProgress,
    ProgressReporter,
    RunSummary,
    run_experiment,
    run_experiment_async,
)
from trustbench.core.spec._manifest import Manifest, build_manifest, freeze_manifest
from trustbench.errors import InputError

SpecSource = Mapping[str, Any] | Path | str
"""A spec file path, or the spec itself as a mapping (the TOML file's content)."""
SPEC_FILE = "spec.json"
"""Where a spec given as a mapping is kept in the run folder."""


@dataclass(frozen=True)
class ExperimentResult:
    """What one `run_spec` call froze, ran and reported."""

    manifest: Manifest
    """The frozen manifest (its `manifest_sha256` identifies the experiment)."""
    run: RunSummary
    """What the run step did (trials run now and before, failures)."""
    report: ReportResult
    """The report step's result: `record.json`, `report.html` and the gate verdicts."""


def _freeze(spec: SpecSource, run_dir: Path, base_dir: Path | None) -> Manifest:
    if not isinstance(spec, Mapping):
        manifest = build_manifest(Path(spec), base_dir=base_dir)
        freeze_manifest(manifest, run_dir)
        return manifest
    try:
        text = json.dumps(spec, indent=2, sort_keys=True, allow_nan=False) + "\n"
    except (TypeError, ValueError) as error:
        raise InputError(f"spec mapping is not JSON-serialisable: {error}") from None
    # Freeze from a scratch copy first: a spec refused here (invalid, or not the experiment
    # already frozen in `run_dir`) must never overwrite the run folder's `spec.json`.
    with tempfile.TemporaryDirectory() as scratch:
        draft = Path(scratch) / SPEC_FILE
        draft.write_text(text, encoding="utf-8")
        manifest = build_manifest(draft, base_dir=base_dir or Path.cwd())
        freeze_manifest(manifest, run_dir)
    kept = run_dir / SPEC_FILE
    if not kept.exists():
        kept.write_text(text, encoding="utf-8")
    return manifest


def run_spec(
    spec: SpecSource,
    run_dir: Path | str,
    *,
    base_dir: Path | str | None = None,
    progress: ProgressReporter | None = None,
    preflight: bool = True,
) -> ExperimentResult:
    """Freeze `spec` into `run_dir`, run every trial, and write the report.

    Re-running with the same spec and folder resumes: finished trials are kept, not re-run.

    Args:
        spec: A spec file (TOML or `*.json`) or the spec as a mapping.
        run_dir: The run folder (created if needed).
        base_dir: Folder relative paths in the spec are relative to (default: the spec file's
            folder, or the current folder for a mapping).
        progress: Where progress goes (default: nowhere).
        preflight: Probe every API candidate once, alone, before the first trial (as `trustbench
            run` does; `run_experiment`'s argument of the same name).

    Returns:
        The manifest, the run summary and the report result.

    Raises:
        InputError: The spec or the folder is invalid.
        CheckFailed: The folder holds a different experiment, or its record was altered.
    """
    # asyncio and its thread pools load when an experiment runs, not with `trustbench.core`
    # (which every command, `--help` included, imports): 10 to 20 ms with ssl (issue 47).
    import asyncio
    import concurrent.futures

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_spec_blocking(spec, Path(run_dir), base_dir, progress, preflight)
    # An event loop is running in this thread (Jupyter): run on a thread of our own.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        job = pool.submit(_run_spec_blocking, spec, Path(run_dir), base_dir, progress, preflight)
        return job.result()


def _run_spec_blocking(
    spec: SpecSource,
    run_dir: Path,
    base_dir: Path | str | None,
    progress: ProgressReporter | None,
    preflight: bool,
) -> ExperimentResult:
    manifest = _freeze(spec, run_dir, Path(base_dir) if base_dir else None)
    summary = run_experiment(run_dir, progress or NoProgress(), preflight=preflight)
    return ExperimentResult(manifest, summary, report_run(run_dir))


async def run_spec_async(
    spec: SpecSource,
    run_dir: Path | str,
    *,
    base_dir: Path | str | None = None,
    progress: ProgressReporter | None = None,
    preflight: bool = True,
) -> ExperimentResult:
    """The awaitable `run_spec`: trials run on the running loop, freeze and report off it.

    Args:
        spec: A spec file (TOML or `*.json`) or the spec as a mapping.
        run_dir: The run folder (created if needed).
        base_dir: As for `run_spec`.
        progress: Where progress goes (default: nowhere).
        preflight: As for `run_spec`.

    Returns:
        The manifest, the run summary and the report result.
    """
    import asyncio

    folder = Path(run_dir)
    base = Path(base_dir) if base_dir else None
    manifest = await asyncio.to_thread(_freeze, spec, folder, base)
    summary = await run_experiment_async(folder, progress or NoProgress(), preflight=preflight)
    report = await asyncio.to_thread(report_run, folder)
    return ExperimentResult(manifest, summary, report)
