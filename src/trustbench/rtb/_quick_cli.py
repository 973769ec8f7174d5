"""`trustbench rtb review|workflow --model PROVIDER/NAME`: try a model without writing a spec.

The commands share their options; each track builds its own default spec (`rtb/_quick.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trustbench._quick_options import Limit, api_key_env_option, base_url_option

if TYPE_CHECKING:
    from trustbench.rtb._quick import QuickTrack

_Model = Annotated[
    str,
    typer.Option("--model", help="PROVIDER/NAME, e.g. openai/gpt-4o-mini (openai, anthropic)."),
]
_BaseUrl = Annotated[str | None, base_url_option()]
_ApiKeyEnv = Annotated[str | None, api_key_env_option("OPENAI_API_KEY or ANTHROPIC_API_KEY")]
_Trials = Annotated[int, typer.Option("--trials", min=1, help="Trials per case.")]
_Out = Annotated[
    str | None,
    typer.Option("--out", help="Run folder (default: runs/<track>-<model name>)."),
]


def _run_dir(track: str, model: str, out: str | None) -> Path:
    """`--out` as given (refused when empty: not the working folder), else runs/<track>-<model>."""
    from trustbench._quick_model import candidate_name
    from trustbench.core import output_path

    if out is not None:
        return output_path(out)
    return Path("runs") / f"{track}-{candidate_name(model)}"


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
    ) -> None:
        from trustbench.rtb._quick import freeze_run_report

        quick: QuickTrack = import_module(f"trustbench.rtb.{track}._quick").QUICK
        text = quick.spec_text(
            model, base_url=base_url, api_key_env=api_key_env, trials_per_case=trials
        )
        freeze_run_report(_run_dir(track, model, out), text, limit=limit)

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
