"""`trustbench rtb review --model openai/NAME`: try a model on the reviewer track without a spec.

Inspect users expect `inspect eval TASK --model openai/NAME`. This builds the default spec for
that model (the built-in corpus, the reviewer demo's analysis and gates), writes it as
`spec.toml` into the run folder before freezing it, then runs freeze, run and report as the
three commands would. The printed spec is an ordinary one: edit it and rerun it with
`trustbench freeze SPEC --out NEW`, `run NEW`, `report NEW`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from trustbench.errors import InputError, did_you_mean

PROVIDERS = {"openai": "openai_chat", "anthropic": "anthropic_messages"}
"""`--model PROVIDER/NAME` prefix -> candidate kind (the kinds' SDK defaults apply)."""

DEMO_SPEC = Path(__file__).resolve().parent.parent / "experiments" / "demo_review.toml"
"""The packaged reviewer demo spec: its `[analysis]` and `[[gates]]` are the quick path's."""

SPEC_FILE = "spec.toml"
"""The spec the quick path writes into the run folder (and freezes)."""


def _toml_string(value: str) -> str:
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


def quick_spec_text(
    model: str,
    *,
    base_url: str | None = None,
    api_key_env: str | None = None,
    trials_per_case: int = 1,
) -> str:
    """The default reviewer-track spec for one API model, as TOML.

    Args:
        model: `PROVIDER/NAME` (see `PROVIDERS`).
        base_url: The server (default: the provider SDK's: `$OPENAI_BASE_URL` or the public
            endpoint, with the key in `OPENAI_API_KEY`).
        api_key_env: Name of the variable holding the key; a local `base_url` sends none unless
            this is given.
        trials_per_case: Repeated trials of each case.
    """
    from trustbench.rtb.corpus._load import BUILTIN_VERSION

    kind, name = parse_model(model)
    candidate = [
        "[[candidates]]",
        f"name = {_toml_string(candidate_name(model))}",
        f"kind = {_toml_string(kind)}",
        f"model = {_toml_string(name)}",
    ]
    if base_url:
        candidate.append(f"base_url = {_toml_string(base_url)}")
    if api_key_env:
        candidate.append(f"api_key_env = {_toml_string(api_key_env)}")
    candidate.append("settings = { temperature = 0.0, max_tokens = 800 }")
    demo = DEMO_SPEC.read_text(encoding="utf-8")
    analysis_and_gates = demo[demo.index("[analysis]") :]
    header = [
        f"# Written by `trustbench rtb review --model {model}`: edit it and rerun it with",
        "# `trustbench freeze THIS --out NEW`, `trustbench run NEW`, `trustbench report NEW`.",
        'suite = "rtb"',
        'track = "review"',
        f"description = {_toml_string(f'Reviewer track quick check of {model}.')}",
        f"trials_per_case = {trials_per_case}",
        "concurrency = 4",
        "timeout_s = 120.0",
        "order_seed = 1",
        "",
        "[corpus]",
        f'builtin = "v{BUILTIN_VERSION}"',
        "",
        "[retry]",
        "transport_max_retries = 3",
        'retry_on = ["rate_limited", "server_error", "connection_error"]',
        "candidate_resample = 0",
        "",
    ]
    return "\n".join([*header, *candidate, "", analysis_and_gates])


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
