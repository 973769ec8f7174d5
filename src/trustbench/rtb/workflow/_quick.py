"""`trustbench rtb workflow --model openai/NAME`: the workflow track's default spec for a model.

The model is the tool-calling agent (an `openai_chat` / `anthropic_messages` candidate), acting
on the simulated platform behind the reference boundary, with the budget of
`examples/rtb-workflow-local.toml`; the analysis and gates are the workflow demo's, whose
thresholds are sized for the built-in corpus. The shared parts (parsing `--model`, writing the
spec, freeze/run/report) are `rtb/_quick.py`'s.
"""

from __future__ import annotations

from pathlib import Path

from trustbench.rtb._quick import quick_spec

DEMO_SPEC = Path(__file__).resolve().parent.parent / "experiments" / "demo_workflow.toml"
"""The packaged workflow demo spec: its `[analysis]` and `[[gates]]` are the quick path's."""

TRACK_OPTIONS = [
    "[track_options]",
    "scenario_seed = 0",
    "observation_deadline_s = 600.0",
    '# kinds = ["direct", "metadata_forging"]    # restrict scenario kinds for a smaller run',
    'boundary = "reference"       # the boundary the agent acts behind',
    "budget = { max_steps = 40, max_tokens = 200000, max_wall_s = 300.0 }",
    "",
]
"""The agent's boundary and per-trial budget (an API candidate's settings go to the model)."""


def workflow_quick_spec_text(
    model: str,
    *,
    base_url: str | None = None,
    api_key_env: str | None = None,
    trials_per_case: int = 1,
) -> str:
    """The default workflow-track spec with one API model as the agent, as TOML.

    Args:
        model: `PROVIDER/NAME` (see `trustbench._quick_model.PROVIDERS`); it must call tools.
        base_url: The server (default: the provider SDK's).
        api_key_env: Name of the variable holding the key; a local `base_url` sends none unless
            this is given.
        trials_per_case: Independent trials of each scenario.

    Raises:
        InputError: a malformed `--model`.
    """
    return quick_spec(
        "workflow",
        model,
        description=f"Workflow track quick check of {model} as a tool-calling agent.",
        demo_spec=DEMO_SPEC,
        max_tokens=1024,
        track_options=TRACK_OPTIONS,
        base_url=base_url,
        api_key_env=api_key_env,
        trials_per_case=trials_per_case,
    )
