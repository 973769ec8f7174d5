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
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from trustbench.errors import InputError, did_you_mean

PROVIDERS = {"openai": "openai_chat", "anthropic": "anthropic_messages"}
"""`--model PROVIDER/NAME` prefix -> candidate kind (the kinds' SDK defaults apply)."""

SPEC_FILE = "spec.toml"
"""The spec a quick path writes into the run folder (and freezes)."""

LOCAL_SERVERS = {
    "ollama": 11434,
    "vllm": 8000,
    "lmstudio": 1234,
    "llamacpp": 8080,
    "llama.cpp": 8080,
}
"""Local servers users name as a provider, with the port each serves its OpenAI-compatible API on
by default: they speak `openai`, at `http://127.0.0.1:PORT/v1`."""


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
    if provider.lower() in LOCAL_SERVERS:
        port = LOCAL_SERVERS[provider.lower()]
        raise InputError(
            f"{provider} serves the OpenAI chat API: use --model openai/{name} --base-url "
            f"http://127.0.0.1:{port}/v1 ({provider}'s default port; no key is sent)",
            location="--model",
        )
    if provider not in PROVIDERS:
        raise InputError(
            f"unknown provider {provider!r}{did_you_mean(provider, PROVIDERS)} (known: "
            f"{', '.join(PROVIDERS)})",
            location="--model",
        )
    return PROVIDERS[provider], name


def check_api_key_env(value: str | None) -> None:
    """Refuse an `--api-key-env` value that is a key rather than a variable's name.

    Called before anything is written: a key pasted here used to land in `spec.toml` before the
    freeze refused it (the spec's own check, `looks_like_a_key`, is the one applied here). The
    value is never quoted back.

    Raises:
        InputError: the value looks like a key, or is not a variable name at all.
    """
    from trustbench.core import looks_like_a_key

    if value is None:
        return
    key_like = looks_like_a_key(value)
    if not key_like and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        return
    raise InputError(
        f"--api-key-env takes the NAME of the variable holding the key (e.g. OPENAI_API_KEY), "
        f"not the key: the value given ({len(value)} characters, not shown) "
        f"{'looks like a key' if key_like else 'is not a variable name'}. Nothing was written; "
        "export the key (export MY_KEY=...) and pass --api-key-env MY_KEY",
        location="--api-key-env",
    )


@dataclass(frozen=True)
class CallLimits:
    """How a quick path calls the server (`--timeout`, `--concurrency`, `--max-tokens`, ...).

    None keeps the quick path's (or the built-in spec's) own value; `--extraction` is passed
    through as given.
    """

    timeout_s: float | None = None
    """The spec's `timeout_s` (one call)."""
    concurrency: int | None = None
    """The spec's `concurrency` (the ceiling of the adaptive limit)."""
    max_tokens: int | None = None
    """The candidate's `settings.max_tokens`."""
    extraction: str | None = None
    """`[track_options] answer_extraction`, passed through as given (the track checks it)."""


def with_top_level(text: str, settings: dict[str, float | int | None]) -> str:
    """The spec `text` with each given top-level key set (replaced where it is, else added).

    Top-level keys are those before the first table header; a new one goes right after the
    `track = ...` line. None values are left as the spec has them.
    """
    lines = text.split("\n")
    first_table = next((i for i, line in enumerate(lines) if line.startswith("[")), len(lines))
    for key, value in settings.items():
        if value is None:
            continue
        line = f"{key} = {value!r}"
        found = [i for i in range(first_table) if re.match(rf"{key}\s*=", lines[i])]
        if found:
            lines[found[0]] = line
            continue
        after = next((i for i in range(first_table) if lines[i].startswith("track")), -1)
        lines.insert(after + 1, line)
        first_table += 1
    return "\n".join(lines)


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


def next_free_folder(first: Path) -> Path:
    """`first`, or the first of `first-2`, `first-3`, ... that is absent or empty.

    An earlier run's folder is evidence: a new run never writes into it (`demo` and `--new`).
    """
    candidate, number = first, 1
    while candidate.exists() and any(candidate.iterdir()):
        number += 1
        candidate = first.with_name(f"{first.name}-{number}")
    return candidate


def quick_folder(default: Path, out: Path | None, *, new: bool) -> Path:
    """The run folder of a quick path: `--out` or the default, or (with `--new`) the next free one.

    Rerunning a quick command resumes its folder (a `--limit` run goes on; a finished one is
    reported again, `finished_note`); `--new` measures again into a folder of its own.
    """
    folder = out if out is not None else default
    return next_free_folder(folder) if new else folder


def finished_note(run_dir: Path) -> str | None:
    """What to say when `run_dir` already holds a complete run (its record says so), else None.

    The rerun then sends nothing: the same spec on a finished folder has nothing left to run,
    and the report is of the earlier results. Said before the run, so a user who changed the
    server behind the same `--base-url` knows those results are not the new server's.
    """
    record = run_dir / "record.json"
    try:
        complete = json.loads(record.read_text(encoding="utf-8")).get("complete") is True
    except (OSError, ValueError, AttributeError):
        return None
    if not complete:
        return None
    again = next_free_folder(run_dir)
    return (
        f"{run_dir} already holds a finished run of this command: reporting it again, nothing "
        f"is sent. To measure again (e.g. after changing the server) add --new to the same "
        f"command: it writes {again}"
    )


@contextmanager
def removed_if_refused(run_dir: Path, *, made_here: bool | None = None) -> Iterator[None]:
    """Remove the run folder this command made when it is refused before anything was sent.

    A failed attempt (an unset key, a bad URL found by the preflight, a refused freeze) used to
    leave a `spec.toml` that refused the corrected command ("a different spec"). A folder that
    existed before, or where any attempt was recorded, is kept: it may be evidence.
    `made_here`: whether this command made the folder (None: it does so inside the block).

    The refusal then says the folder is gone: the command had already printed
    `spec: RUN/spec.toml (edit it and rerun ...)`, and a user went looking for that file. Hints
    that need the kept folder (`trustbench run --no-preflight`, `freeze --allow-missing-keys`)
    are dropped from it: the fix is to rerun this command.
    """
    from trustbench.errors import RUN_FOLDER_HINTS, TrustbenchError

    if made_here is None:
        made_here = not run_dir.exists()
    try:
        yield
    except TrustbenchError as refused:
        if not made_here or _attempt_recorded(run_dir):
            raise
        shutil.rmtree(run_dir, ignore_errors=True)
        message = refused.message
        for needs_the_folder in RUN_FOLDER_HINTS:
            message = message.replace(needs_the_folder, "")
        kept_nothing = f"; nothing was kept ({run_dir} removed): fix that and rerun this command"
        raise type(refused)(message + kept_nothing, location=refused.location) from None


def _attempt_recorded(run_dir: Path) -> bool:
    """Whether the folder's ledger holds any attempt or trial (no ledger: none)."""
    if not (run_dir / "ledger.sqlite").exists():
        return False
    from trustbench.core import read_ledger

    try:
        ledger = read_ledger(run_dir)
    except Exception:  # an unreadable ledger: keep the folder (it is not ours to judge)
        return True
    return bool(ledger.attempts or ledger.trials)


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
                f"{SPEC_FILE} there is a different spec; add --new (the next free folder) or "
                "name a new folder with --out",
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


Timeout = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        min=0.001,
        help="Seconds one call may take (timeout_s; rtb default 120): a slow local server "
        "needs more.",
    ),
]
"""`--timeout S`: the spec's `timeout_s` (per call)."""

Concurrency = Annotated[
    int | None,
    typer.Option(
        "--concurrency",
        min=1,
        help="Calls in flight at most (rtb default 4; a ceiling, halved while the server "
        "times out or answers 429/503). 1 for a server that answers one request at a time.",
    ),
]
"""`--concurrency N`: the spec's `concurrency`, the ceiling of the adaptive limit."""

MaxTokens = Annotated[
    int | None,
    typer.Option("--max-tokens", min=1, help="Completion token limit of each call."),
]
"""`--max-tokens N`: the candidate's `settings.max_tokens` (default: the track's)."""

New = Annotated[
    bool,
    typer.Option(
        "--new",
        help="Measure again into the next free folder (RUN-2, RUN-3, ...) instead of "
        "resuming or re-reporting RUN.",
    ),
]
"""`--new`: a fresh run folder, never the earlier run's."""
