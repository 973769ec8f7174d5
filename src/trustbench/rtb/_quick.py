"""The spec-free quick paths (`trustbench rtb review|workflow --model PROVIDER/NAME`), shared.

Inspect users expect `inspect eval TASK --model openai/NAME`. A quick path builds the track's
default spec for that model, writes it as `spec.toml` into the run folder before freezing it,
then runs freeze, run and report as the three commands would. The written spec is an ordinary
one: edit it and rerun it with `trustbench freeze SPEC --out NEW`, `run NEW`, `report NEW`.
Each track says only what differs (`rtb/review/_quick.py`, `rtb/workflow/_quick.py`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from trustbench.errors import InputError, did_you_mean

PROVIDERS = {"openai": "openai_chat", "anthropic": "anthropic_messages"}
"""`--model PROVIDER/NAME` prefix -> candidate kind (the kinds' SDK defaults apply)."""

SPEC_FILE = "spec.toml"
"""The spec a quick path writes into the run folder (and freezes)."""


def toml_string(value: str) -> str:
    """`value` as a TOML basic string."""
    # A JSON string (quotes, backslash and control escapes, \uXXXX) is a TOML basic string.
    return json.dumps(value, ensure_ascii=False)


def parse_model(model: str) -> tuple[str, str]:
    """`openai/gpt-4o-mini` -> (`openai_chat`, `gpt-4o-mini`).

    Raises:
        InputError: no `PROVIDER/` prefix, an unknown provider, or no model name.
    """
    provider, slash, name = model.partition("/")
    if not slash or not name:
        raise InputError(
            f"--model {model!r} must be PROVIDER/NAME, e.g. openai/gpt-4o-mini (providers: "
            f"{', '.join(PROVIDERS)})",
            location="--model",
        )
    if provider not in PROVIDERS:
        raise InputError(
            f"unknown provider {provider!r}{did_you_mean(provider, PROVIDERS)} (known: "
            f"{', '.join(PROVIDERS)})",
            location="--model",
        )
    return PROVIDERS[provider], name


def candidate_name(model: str) -> str:
    """A configuration name for the model: its name part, with only `[A-Za-z0-9._-]` kept."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model.partition("/")[2]).strip("-") or "model"


def candidate_lines(
    model: str, *, base_url: str | None, api_key_env: str | None, settings: str
) -> list[str]:
    """The `[[candidates]]` table for the model (`settings`: a TOML inline table).

    Raises:
        InputError: a malformed `--model` (see `parse_model`).
    """
    kind, name = parse_model(model)
    lines = [
        "[[candidates]]",
        f"name = {toml_string(candidate_name(model))}",
        f"kind = {toml_string(kind)}",
        f"model = {toml_string(name)}",
    ]
    if base_url:
        lines.append(f"base_url = {toml_string(base_url)}")
    if api_key_env:
        lines.append(f"api_key_env = {toml_string(api_key_env)}")
    lines.append(f"settings = {settings}")
    return lines


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


def write_quick_spec(run_dir: Path, text: str) -> Path:
    """Write the spec into a new run folder (an earlier identical one is kept and resumed).

    Raises:
        InputError: the folder holds a different spec or another run.
    """
    from trustbench.core.runs import is_run_folder

    path = run_dir / SPEC_FILE
    if path.exists():
        if path.read_text(encoding="utf-8") != text:
            raise InputError(
                f"{SPEC_FILE} there is a different spec; name a new folder with --out",
                location=str(run_dir),
            )
        return path
    if is_run_folder(run_dir):
        raise InputError("--out names another run's folder; name a new one", location=str(run_dir))
    run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


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
