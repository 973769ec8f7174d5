"""Freeze + run + report in one call, for built-in TRB experiment specs and the demo."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from trustbench.core import ProgressReporter, ReportResult, run_spec
from trustbench.errors import InputError

BUILTIN_SPECS: tuple[str, ...] = ("smoke", "reference")
"""Experiment specs shipped in `trustbench/trb/experiments/<name>.toml`."""


def builtin_spec(name: str) -> Path:
    """The path of a built-in spec, or of `name` itself when it is a spec file.

    Raises:
        InputError: neither a built-in name nor an existing file.
    """
    if name in BUILTIN_SPECS:
        return Path(str(files("trustbench.trb").joinpath("experiments", f"{name}.toml")))
    path = Path(name)
    if not path.is_file():
        raise InputError(
            f"not a built-in TRB spec ({', '.join(BUILTIN_SPECS)}) nor a spec file",
            location=name,
        )
    return path


def freeze_run_report(
    spec: Path,
    out_dir: Path,
    progress: ProgressReporter | None = None,
    *,
    limit: int | None = None,
) -> ReportResult:
    """Freeze `spec` into `out_dir`, run (or resume) it, and write record.json + report.html.

    Re-running into a folder holding the same frozen manifest resumes it; a different one is
    refused by `write_manifest`. `limit` runs only that many of the remaining trials (`trustbench
    run --limit`): the report is then of an incomplete run.
    """
    if limit is None:
        return run_spec(spec, out_dir, progress=progress).report
    from trustbench.core import build_manifest, report_run, run_experiment, write_manifest

    write_manifest(build_manifest(spec), out_dir)
    run_experiment(out_dir, progress, limit=limit, preflight=True)
    return report_run(out_dir)


def run_trb_demo(out_dir: Path) -> Path:
    """The TRB step of `trustbench demo`: the built-in smoke spec into `out_dir`.

    The full profile: all six tracks for the five spec §4 baselines (three token-world proxy
    LMs, the reference pair) and three audit oracles, on the first 40 eval and 20 transfer
    traces (`max_traces = 40`). Measured on a busy, shared 2-core machine: about 45 s of CPU
    (90 s wall) the first time, when the two reference models and the two proxy LMs are
    trained and cached under `$TRUSTBENCH_CACHE`; about 25 s of CPU (30 s wall) after.
    Re-running into the same folder resumes it (nothing left to run).

    Returns:
        The written `report.html`.
    """
    return freeze_run_report(builtin_spec("smoke"), Path(out_dir)).html_path
