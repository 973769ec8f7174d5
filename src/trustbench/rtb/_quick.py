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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Annotated

import typer

from trustbench._quick_model import (
    CallLimits,
    Concurrency,
    Limit,
    MaxTokens,
    New,
    Timeout,
    api_key_env_option,
    base_url_option,
    candidate_lines,
    check_api_key_env,
    finished_note,
    quick_folder,
    removed_if_refused,
    toml_string,
    write_quick_spec,
)
from trustbench.errors import InputError


def header_lines(
    track: str,
    model: str,
    *,
    description: str,
    trials_per_case: int,
    builtin: str,
    concurrency: int = 4,
    timeout_s: float = 120.0,
) -> list[str]:
    """The spec's top: track, built-in corpus `builtin`, transport retries.

    A timed-out call is retried too: the calls in flight halve on a timeout (adaptive
    concurrency, `docs/experiment-spec.md`), so the retry meets a server with less queued.
    """
    return [
        f"# Written by `trustbench rtb {track} --model {model}`: edit it and rerun it with",
        "# `trustbench freeze THIS --out NEW`, `trustbench run NEW`, `trustbench report NEW`.",
        'suite = "rtb"',
        f"track = {toml_string(track)}",
        f"description = {toml_string(description)}",
        f"trials_per_case = {trials_per_case}",
        f"concurrency = {concurrency}",
        f"timeout_s = {float(timeout_s)!r}",
        "order_seed = 1",
        "",
        "[corpus]",
        f"builtin = {toml_string(builtin)}",
        "",
        "[retry]",
        "transport_max_retries = 3",
        'retry_on = ["rate_limited", "server_error", "connection_error", "timeout"]',
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
    default_extraction: str | None = None
    """The track's `answer_extraction` when `--extraction` is not given; None for a track that
    has no answer to extract (it then refuses `--extraction`)."""

    def spec_text(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        trials_per_case: int = 1,
        call: CallLimits | None = None,
    ) -> str:
        """The track's default spec for one API model, as TOML: what `rtb TRACK --model` freezes.

        Args:
            model: `PROVIDER/NAME` (see `trustbench._quick_model.PROVIDERS`).
            base_url: The server (default: the provider SDK's: e.g. `$OPENAI_BASE_URL` or the
                public endpoint, with the key in `OPENAI_API_KEY`).
            api_key_env: Name of the variable holding the key; a local `base_url` sends none
                unless this is given.
            trials_per_case: Repeated trials of each case (or scenario).
            call: Timeout, concurrency, completion limit and answer extraction (default: the
                quick path's: 120 s, 4, the track's `max_tokens`, the track's extraction).

        Raises:
            InputError: a malformed `--model` (see `parse_model`), or an answer extraction
                given to a track that has none.
        """
        call = call or CallLimits()
        max_tokens = call.max_tokens or self.max_tokens
        candidate = candidate_lines(
            model,
            base_url=base_url,
            api_key_env=api_key_env,
            settings=f"{{ temperature = 0.0, max_tokens = {max_tokens} }}",
        )
        header = header_lines(
            self.track,
            model,
            description=self.description.format(model=model),
            trials_per_case=trials_per_case,
            builtin=demo_corpus(self.demo_spec),
            concurrency=call.concurrency or 4,
            timeout_s=call.timeout_s or 120.0,
        )
        options = [*self.track_options, *self._extraction_lines(call.extraction)]
        parts = [*header, *options, *candidate, "", analysis_and_gates(self.demo_spec)]
        return "\n".join(parts)

    def _extraction_lines(self, extraction: str | None) -> list[str]:
        """`[track_options] answer_extraction`, as given (the track validates it at freeze)."""
        chosen = extraction or self.default_extraction
        if chosen is None:
            return []
        if self.default_extraction is None:
            raise InputError(
                f"the {self.track} track reads tool calls, not an answer to extract: "
                "--extraction applies to `rtb review`",
                location="--extraction",
            )
        return ["[track_options]", f"answer_extraction = {toml_string(chosen)}", ""]


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

    Prints the spec's path and the gate lines, and exits as `trustbench report` does. A folder
    this call made is removed again when it is refused before anything was sent (an unset key,
    a failed preflight), so the corrected command finds nothing in its way; a folder holding a
    finished run of the same spec is reported again, saying so and how to measure anew.
    """
    import typer

    from trustbench.core import (
        CountingProgress,
        build_manifest,
        default_progress,
        report_run,
        run_experiment,
        write_manifest,
    )
    from trustbench.core.cli import exit_interrupted, report_exit

    with removed_if_refused(run_dir):
        spec = write_quick_spec(run_dir, spec_text)
        typer.echo(f"spec: {spec} (edit it and rerun: trustbench freeze {spec} --out NEW)")
        note = finished_note(run_dir)
        if note is not None:
            typer.echo(f"note: {note}")
        write_manifest(build_manifest(spec), run_dir)
        progress = CountingProgress(default_progress())
        try:
            summary = run_experiment(run_dir, progress, limit=limit, preflight=True)
        except KeyboardInterrupt:  # the folder is kept: its ledger holds the finished trials
            exit_interrupted(
                progress,
                f"the same command (or trustbench run {run_dir}, then trustbench report {run_dir})",
            )
    for name, why in summary.stopped.items():
        typer.echo(f"candidate {name!r} stopped: {why}", err=True)
    report_exit(report_run(run_dir))


# ------------------------------------------------------------------------------------------------
# `trustbench rtb review|workflow --model PROVIDER/NAME`: try a model without writing a spec.
#
# The commands share their options; each track builds its own default spec (`rtb/_quick.py`).

_Model = Annotated[
    str,
    typer.Option(
        "--model",
        help="PROVIDER/NAME, e.g. openai/gpt-4o-mini (openai, anthropic); a local server "
        "(Ollama, vLLM, LM Studio) is openai/NAME with --base-url http://127.0.0.1:PORT/v1.",
    ),
]
_BaseUrl = Annotated[str | None, base_url_option()]
_ApiKeyEnv = Annotated[str | None, api_key_env_option("OPENAI_API_KEY or ANTHROPIC_API_KEY")]
_Trials = Annotated[int, typer.Option("--trials", min=1, help="Trials per case.")]
_Out = Annotated[
    str | None,
    typer.Option("--out", help="Run folder (default: runs/<track>-<model name>)."),
]
_Extraction = Annotated[
    str | None,
    typer.Option(
        "--extraction",
        help="Reviewer track: how the answer is read from a reply (the spec's "
        "track_options.answer_extraction; default: the track's).",
    ),
]


def _run_dir(track: str, model: str, out: str | None, *, new: bool) -> Path:
    """`--out` as given (refused when empty), else runs/<track>-<model>.

    With `--new`: the next free folder after it.
    """
    from trustbench._quick_model import candidate_name
    from trustbench.core import output_path

    given = output_path(out) if out is not None else None
    return quick_folder(Path("runs") / f"{track}-{candidate_name(model)}", given, new=new)


def _quick_command(track: str, doc: str) -> Callable[..., None]:
    """One quick-path command for `track`: both share every option and step.

    The track's `QuickTrack` (`QUICK` in `trustbench.rtb.<track>._quick`) is imported only when
    the command runs, so the CLI starts without the track's modules.
    """

    def command(
        model: _Model,
        base_url: _BaseUrl = None,
        api_key_env: _ApiKeyEnv = None,
        limit: Limit = None,
        trials: _Trials = 1,
        out: _Out = None,
        timeout: Timeout = None,
        concurrency: Concurrency = None,
        max_tokens: MaxTokens = None,
        extraction: _Extraction = None,
        new: New = False,
    ) -> None:
        check_api_key_env(api_key_env)  # before anything is written: a key is never stored
        quick: QuickTrack = import_module(f"trustbench.rtb.{track}._quick").QUICK
        call = CallLimits(timeout, concurrency, max_tokens, extraction)
        text = quick.spec_text(
            model, base_url=base_url, api_key_env=api_key_env, trials_per_case=trials, call=call
        )
        freeze_run_report(_run_dir(track, model, out, new=new), text, limit=limit)

    command.__name__ = command.__qualname__ = track
    command.__doc__ = doc
    return command


review = _quick_command(
    "review",
    """Try a model on the reviewer track without writing a spec: freeze, run and report it.

    The spec is written as RUN/spec.toml before it is frozen: edit it and rerun it with
    `trustbench freeze`, `run` and `report`. Exit codes as `report`'s (1 a failed gate, 4 an
    incomplete run, e.g. with --limit).
    """,
)
workflow = _quick_command(
    "workflow",
    """Try a tool-calling model as the workflow track's agent without writing a spec.

    The model acts on the simulated platform behind the reference boundary; freeze, run and
    report as `rtb review --model` does. The spec is written as RUN/spec.toml before it is
    frozen: edit it and rerun it with `trustbench freeze`, `run` and `report`. Exit codes as
    `report`'s (1 a failed gate, 4 an incomplete run, e.g. with --limit).
    """,
)
