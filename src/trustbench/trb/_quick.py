"""`trustbench trb run --model openai/NAME`: TRB's default spec with one chat model added.

The built-in spec (`smoke` unless `--spec` names another) as it stands: its corpus, track
options, baselines, oracles and gates, plus the model as an `openai_chat` candidate, which the
track wraps in the chat proxy adapter (`proxy:chat`). The model is so measured beside the five
spec baselines and the audit oracles, and held to the trust verdict every chat candidate gets
(the implicit `trb_trustworthy` gate). The spec is written as `RUN/spec.toml` before it is
frozen, so the run is an ordinary one: edit that file and rerun it with
`trustbench trb run --spec RUN/spec.toml --out NEW`. The parts every quick path shares
(`--model`, the candidate's table, writing the spec) are `trustbench._quick_model`'s.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from trustbench._quick_model import (
    CallLimits,
    candidate_lines,
    candidate_name,
    check_api_key_env,
    finished_note,
    parse_model,
    quick_folder,
    toml_string,
    with_top_level,
    write_quick_spec,
)
from trustbench.errors import InputError

CHAT_KIND = "openai_chat"
"""The one candidate kind the TRB chat proxy adapter speaks (see `track/_adapters.py`)."""


def _base_spec(spec: str) -> tuple[Path, str, dict[str, Any]]:
    """The spec to add the model to: its path, text and parsed tables.

    Raises:
        InputError: not a built-in name nor a spec file, or a file naming a relative path (it
            would not resolve from the run folder the spec is written into).
    """
    from trustbench.trb.track._pipeline import builtin_spec

    path = builtin_spec(spec)
    text = path.read_text(encoding="utf-8")
    data = tomllib.loads(text)
    corpus = data.get("corpus")
    relative = (
        isinstance(corpus, dict) and "path" in corpus and not Path(corpus["path"]).is_absolute()
    )
    if relative:
        raise InputError(
            "with --model the spec is copied into the run folder, where a relative "
            "corpus.path would not resolve: make it absolute or use a built-in spec",
            location=f"{spec}: corpus/path",
        )
    return path, text, data


def trb_quick_spec_text(
    model: str,
    *,
    spec: str = "smoke",
    base_url: str | None = None,
    api_key_env: str | None = None,
    max_tokens: int | None = None,
) -> str:
    """The TRB spec `spec` with `model` added as a chat-proxy candidate, as TOML.

    Args:
        model: `openai/NAME` (the chat proxy speaks the OpenAI chat API; any OpenAI-compatible
            server behind `base_url` will do).
        spec: A built-in spec name (`smoke`, `reference`) or a spec file.
        base_url: The server (default: the OpenAI SDK's, `$OPENAI_BASE_URL` or the public
            endpoint, with the key in `OPENAI_API_KEY`).
        api_key_env: Name of the variable holding the key; a `base_url` server gets none unless
            this is given.
        max_tokens: The model's `settings.max_tokens` (None: the server's default). It bounds
            the reasoning reply that must end with the slot block; the act calls set their own.

    Raises:
        InputError: a malformed or non-OpenAI `--model`, a model named as a spec candidate is
            already, or a spec that cannot be copied (see `_base_spec`).
    """
    kind, _ = parse_model(model)
    if kind != CHAT_KIND:
        raise InputError(
            f"TRB's chat proxy adapter speaks the OpenAI chat API only (kind {CHAT_KIND}): "
            "serve the model behind an OpenAI-compatible endpoint and pass openai/NAME with "
            "--base-url",
            location="--model",
        )
    path, text, data = _base_spec(spec)
    name = candidate_name(model)
    taken = {c.get("name") for c in data.get("candidates", []) if isinstance(c, dict)}
    if name in taken:
        raise InputError(
            f"the spec already has a candidate named {name!r}; add the model to a copy of it "
            "by hand",
            location="--model",
        )
    header = [
        f"# Written by `trustbench trb run --model {model}` from the {path.stem} spec below, with",
        "# the model added as the last candidate: edit it and rerun it with",
        "# `trustbench trb run --spec THIS --out NEW`.",
    ]
    settings = None if max_tokens is None else f"{{ max_tokens = {max_tokens} }}"
    candidate = candidate_lines(
        model, base_url=base_url, api_key_env=api_key_env, settings=settings
    )
    body = text.rstrip("\n")
    description = f"# The model: a chat candidate through the proxy adapter ({toml_string(model)})."
    return "\n".join([*header, body, "", description, *candidate]) + "\n"


@dataclass(frozen=True)
class QuickOptions:
    """What `trb run` was given for a model (`--model` and the options that go with it)."""

    model: str | None
    """`--model openai/NAME`, or None (the built-in spec as it is)."""
    base_url: str | None = None
    """`--base-url`."""
    api_key_env: str | None = None
    """`--api-key-env` (a variable's name, checked before anything is written)."""
    call: CallLimits = field(default_factory=CallLimits)
    """`--timeout` and `--concurrency` (None: the spec's own) and `--max-tokens` (None: the
    server's default)."""
    new: bool = False
    """`--new`: the next free folder after the default (or `--out`)."""

    def given(self) -> list[str]:
        """The model options given (they need `--model`)."""
        named = (("--base-url", self.base_url), ("--api-key-env", self.api_key_env),
                 ("--timeout", self.call.timeout_s), ("--concurrency", self.call.concurrency),
                 ("--max-tokens", self.call.max_tokens), ("--new", self.new))  # fmt: skip
        return [name for name, value in named if value]


def spec_and_folder(spec: str, out: Path | None, quick: QuickOptions) -> tuple[Path, Path, bool]:
    """The spec to freeze, the run folder, and whether this call made the folder.

    `spec` itself, or the quick spec for `quick.model` written into its folder (the next free
    one with `--new`). A folder holding a finished run of the same spec is reported again,
    saying so (`finished_note`).

    Raises:
        InputError: no `--out` without `--model`, a model option without `--model`, a
            key-shaped `--api-key-env`, or a bad `--model` (see `trb._quick`).
    """
    from trustbench.trb.track._pipeline import builtin_spec

    if quick.model is None:
        given = quick.given()
        if given:
            raise InputError(f"{', '.join(given)} only go with --model", location=given[0])
        if out is None:
            raise InputError(
                "name the run folder with --out (or give --model PROVIDER/NAME)", location="--out"
            )
        return builtin_spec(spec), out, False
    check_api_key_env(quick.api_key_env)  # before anything is written: a key is never stored
    text = trb_quick_spec_text(
        quick.model,
        spec=spec,
        base_url=quick.base_url,
        api_key_env=quick.api_key_env,
        max_tokens=quick.call.max_tokens,
    )
    text = with_top_level(
        text, {"timeout_s": quick.call.timeout_s, "concurrency": quick.call.concurrency}
    )
    folder = quick_folder(Path("runs") / f"trb-{candidate_name(quick.model)}", out, new=quick.new)
    made_here = not folder.exists()
    written = write_quick_spec(folder, text)
    typer.echo(
        f"spec: {written} (edit it and rerun: trustbench trb run --spec {written} --out NEW)"
    )
    note = finished_note(folder)
    if note is not None:
        typer.echo(f"note: {note}")
    return written, folder, made_here
