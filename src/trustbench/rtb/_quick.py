"""The spec-free quick paths (`trustbench rtb review|workflow --model PROVIDER/NAME`), shared.

Inspect users expect `inspect eval TASK --model openai/NAME`. A quick path builds the track's
default spec for that model, writes it as `spec.toml` into the run folder before freezing it,
then runs freeze, run and report as the three commands would. The written spec is an ordinary
one: edit it and rerun it with `trustbench freeze SPEC --out NEW`, `run NEW`, `report NEW`.
Each track says only what differs, as a `QuickTrack` (`rtb/review/_quick.py`,
`rtb/workflow/_quick.py`); the parts every suite's quick path shares are
`trustbench._quick_model`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class QuickTrack:
    """What one track's quick path says; the rest of its spec is the same for every track.

    The spec: the header (the built-in corpus of the track's packaged demo spec, transport
    retries), the track's options, the model as the one candidate (temperature 0,
    `max_tokens`), and the analysis and gates of that demo spec (sized for its corpus).
    """

    track: str
    """The track (`review`, `workflow`): the spec's `track` and the command's name."""
    description: str
    """The spec's description, `{model}` standing for the model."""
    demo_spec: Path
    """The packaged demo spec whose corpus, `[analysis]` and `[[gates]]` the spec takes."""
    max_tokens: int
    """The candidate's completion token limit."""
    track_options: Sequence[str] = ()
    """The spec's `[track_options]` lines (none: the track's defaults)."""

    def spec_text(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        trials_per_case: int = 1,
    ) -> str:
        """The track's default spec for one API model, as TOML: what `rtb TRACK --model` freezes.

        Args:
            model: `PROVIDER/NAME` (see `trustbench._quick_model.PROVIDERS`).
            base_url: The server (default: the provider SDK's: e.g. `$OPENAI_BASE_URL` or the
                public endpoint, with the key in `OPENAI_API_KEY`).
            api_key_env: Name of the variable holding the key; a local `base_url` sends none
                unless this is given.
            trials_per_case: Repeated trials of each case (or scenario).

        Raises:
            InputError: a malformed `--model` (see `parse_model`).
        """
        candidate = candidate_lines(
            model,
            base_url=base_url,
            api_key_env=api_key_env,
            settings=f"{{ temperature = 0.0, max_tokens = {self.max_tokens} }}",
        )
        header = header_lines(
            self.track,
            model,
            description=self.description.format(model=model),
            trials_per_case=trials_per_case,
            builtin=demo_corpus(self.demo_spec),
        )
        parts = [*header, *self.track_options, *candidate, "", analysis_and_gates(self.demo_spec)]
        return "\n".join(parts)


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

    from trustbench.core import (
        build_manifest,
        default_progress,
        report_run,
        run_experiment,
        write_manifest,
    )
    from trustbench.core.cli import report_exit

    spec = write_quick_spec(run_dir, spec_text)
    typer.echo(f"spec: {spec} (edit it and rerun: trustbench freeze {spec} --out NEW)")
    write_manifest(build_manifest(spec), run_dir)
    run_experiment(run_dir, default_progress(), limit=limit, preflight=True)
    report_exit(report_run(run_dir))
