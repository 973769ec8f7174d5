"""`trustbench rtb review --model openai/NAME`: the reviewer track's default spec for a model.

The reviewer demo's built-in corpus (the reviewer track's default), one candidate (the model),
and the demo's analysis and gates, which are that corpus's policy's review gates. The shared
parts (parsing `--model`, writing the spec, freeze/run/report) are `rtb/_quick.py`'s.
"""

from __future__ import annotations

from pathlib import Path

from trustbench.rtb._quick import quick_spec

DEMO_SPEC = Path(__file__).resolve().parent.parent / "experiments" / "demo_review.toml"
"""The packaged reviewer demo spec: its `[analysis]` and `[[gates]]` are the quick path's."""


def quick_spec_text(
    model: str,
    *,
    base_url: str | None = None,
    api_key_env: str | None = None,
    trials_per_case: int = 1,
) -> str:
    """The default reviewer-track spec for one API model, as TOML.

    Args:
        model: `PROVIDER/NAME` (see `trustbench._quick_model.PROVIDERS`).
        base_url: The server (default: the provider SDK's: `$OPENAI_BASE_URL` or the public
            endpoint, with the key in `OPENAI_API_KEY`).
        api_key_env: Name of the variable holding the key; a local `base_url` sends none unless
            this is given.
        trials_per_case: Repeated trials of each case.

    Raises:
        InputError: a malformed `--model`.
    """
    return quick_spec(
        "review",
        model,
        description=f"Reviewer track quick check of {model}.",
        demo_spec=DEMO_SPEC,
        max_tokens=800,
        base_url=base_url,
        api_key_env=api_key_env,
        trials_per_case=trials_per_case,
    )
