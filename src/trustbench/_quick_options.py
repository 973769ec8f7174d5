"""The command-line options every spec-free quick path shares (`rtb review|workflow`, `trb run`).

Kept outside both suites, beside `_quick_model`, so neither CLI imports the other; a suite where
`--model` is optional passes `prefix="With --model: "` so the help says when an option applies.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

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
