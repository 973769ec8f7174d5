"""The parts every spec-free quick path shares (`rtb review|workflow --model`, `trb run --model`).

Reading `--model PROVIDER/NAME`, the candidate's TOML, writing the spec it freezes.

Inspect users expect `inspect eval TASK --model openai/NAME`. A quick path builds its track's
default spec for that model and writes it as `spec.toml` into the run folder before freezing it,
so the run is an ordinary one: edit that spec and rerun it. Kept outside both suites so neither
imports the other (`rtb/_quick.py`, `trb/_quick.py` build their own specs from these parts).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer

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
    model: str, *, base_url: str | None, api_key_env: str | None, settings: str | None
) -> list[str]:
    """The `[[candidates]]` table for the model (`settings`: a TOML inline table, or none).

    Without `api_key_env` no key line is written: the provider's SDK default applies, and a
    `base_url` server gets no key (core's rule for API candidates).

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
    if settings is not None:
        lines.append(f"settings = {settings}")
    return lines


def write_quick_spec(run_dir: Path, text: str) -> Path:
    """Write the spec into a new run folder (an earlier identical one is kept and resumed).

    Raises:
        InputError: the folder holds a different spec or another run.
    """
    from trustbench.core import is_run_folder

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


# ------------------------------------------------------------------------------------------------
# The command-line options every spec-free quick path shares (`rtb review|workflow`, `trb run`).
#
# Kept outside both suites, beside `_quick_model`, so neither CLI imports the other; a suite where
# `--model` is optional passes `prefix="With --model: "` so the help says when an option applies.

Limit = Annotated[
    int | None,
    typer.Option(
        "--limit",
        min=1,
        help="Run only N trials (a quick check: the run is then incomplete, exit 4).",
    ),
]
"""`--limit N`: a quick check that leaves the run incomplete (exit 4), never complete-looking."""


def _sentence(prefix: str, text: str) -> str:
    return f"{prefix}{text}" if prefix else text[0].upper() + text[1:]


def base_url_option(prefix: str = "") -> Any:
    """`--base-url`: the model server (default: the provider SDK's own)."""
    return typer.Option(
        "--base-url",
        help=_sentence(prefix, "server URL (default: the provider SDK's, e.g. $OPENAI_BASE_URL)."),
    )


def api_key_env_option(default_keys: str, prefix: str = "") -> Any:
    """`--api-key-env`: the variable holding the key (`default_keys`: the providers' defaults)."""
    return typer.Option(
        "--api-key-env",
        help=_sentence(
            prefix,
            f"variable holding the API key (default without --base-url: {default_keys}; "
            "a --base-url server gets none).",
        ),
    )
