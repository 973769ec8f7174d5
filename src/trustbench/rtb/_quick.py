"""The spec-free quick paths (`trustbench rtb review|workflow --model PROVIDER/NAME`), shared.

Inspect users expect `inspect eval TASK --model openai/NAME`. A quick path builds the track's
default spec for that model, writes it as `spec.toml` into the run folder before freezing it,
then runs freeze, run and report as the three commands would. The written spec is an ordinary
one: edit it and rerun it with `trustbench freeze SPEC --out NEW`, `run NEW`, `report NEW`.
Each track says only what differs (`rtb/review/_quick.py`, `rtb/workflow/_quick.py`); the
parts every suite's quick path shares are `trustbench._quick_model`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from trustbench._quick_model import candidate_lines, toml_string, write_quick_spec


def header_lines(
    track: str,
    model: str,
    *,
    description: str,
    trials_per_case: int,
    builtin: str,
    concurrency: int = 4,
) -> list[str]:
    """The spec's top: track, built-in corpus `builtin`, transport retries (no timeout retries)."""
    return [
        f"# Written by `trustbench rtb {track} --model {model}`: edit it and rerun it with",
        "# `trustbench freeze THIS --out NEW`, `trustbench run NEW`, `trustbench report NEW`.",
        'suite = "rtb"',
        f"track = {toml_string(track)}",
        f"description = {toml_string(description)}",
        f"trials_per_case = {trials_per_case}",
        f"concurrency = {concurrency}",
        "timeout_s = 120.0",
        "order_seed = 1",
        "",
        "[corpus]",
        f"builtin = {toml_string(builtin)}",
        "",
        "[retry]",
        "transport_max_retries = 3",
        'retry_on = ["rate_limited", "server_error", "connection_error"]',
        "candidate_resample = 0",
        "",
    ]


def quick_spec(
    track: str,
    model: str,
    *,
    description: str,
    demo_spec: Path,
    max_tokens: int,
    track_options: Sequence[str] = (),
    base_url: str | None = None,
    api_key_env: str | None = None,
    trials_per_case: int = 1,
    corpus_version: str | None = None,
) -> str:
    """A track's default spec for one API model, as TOML: what `rtb TRACK --model` freezes.

    The header (the built-in corpus of the track's packaged demo spec, transport retries), the
    track's options, the model as the one candidate (temperature 0, `max_tokens`), and the
    analysis and gates of that demo spec (sized for its corpus).

    Raises:
        InputError: a malformed `--model` (see `parse_model`).
    """
    candidate = candidate_lines(
        model,
        base_url=base_url,
        api_key_env=api_key_env,
        settings=f"{{ temperature = 0.0, max_tokens = {max_tokens} }}",
    )
    header = header_lines(
        track,
        model,
        description=description,
        trials_per_case=trials_per_case,
        builtin=demo_corpus(demo_spec),
    )
    return "\n".join([*header, *track_options, *candidate, "", analysis_and_gates(demo_spec)])


def demo_corpus(demo_spec: Path) -> str:
    """The built-in corpus a packaged demo spec runs (its gates are sized for that corpus)."""
    import tomllib

    return str(tomllib.loads(demo_spec.read_text(encoding="utf-8"))["corpus"]["builtin"])


def analysis_and_gates(demo_spec: Path) -> str:
    """A packaged demo spec's `[analysis]` and `[[gates]]` (everything from `[analysis]` on)."""
    demo = demo_spec.read_text(encoding="utf-8")
    return demo[demo.index("\n[analysis]") + 1 :]  # the table, not a comment naming it


def freeze_run_report(run_dir: Path, spec_text: str, *, limit: int | None) -> None:
    """Write the spec, then freeze, run (with the preflight probe) and report it.

    Prints the spec's path and the gate lines, and exits as `trustbench report` does.
    """
    import typer

    from trustbench.core import build_manifest, report_run, run_experiment, write_manifest
    from trustbench.core.cli import report_exit
    from trustbench.core.runs import default_progress

    spec = write_quick_spec(run_dir, spec_text)
    typer.echo(f"spec: {spec} (edit it and rerun: trustbench freeze {spec} --out NEW)")
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir, default_progress(), limit=limit, preflight=True)
    report_exit(report_run(run_dir))
