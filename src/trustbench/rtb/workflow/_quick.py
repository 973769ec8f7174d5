"""`trustbench rtb workflow --model openai/NAME`: the workflow track's default spec for a model.

The model is the tool-calling agent (an `openai_chat` / `anthropic_messages` candidate), acting
on the simulated platform behind the reference boundary, with the budget of
`examples/rtb-workflow-local.toml`; the analysis and gates are the workflow demo's, whose
thresholds are sized for the built-in corpus. The shared parts (parsing `--model`, writing the
spec, freeze/run/report) are `rtb/_quick.py`'s.
"""

from __future__ import annotations

from pathlib import Path

from trustbench.rtb._quick import QuickTrack

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

QUICK = QuickTrack(
    "workflow",
    description="Workflow track quick check of {model} as a tool-calling agent.",
    demo_spec=Path(__file__).resolve().parent.parent / "experiments" / "demo_workflow.toml",
    max_tokens=1024,
    track_options=TRACK_OPTIONS,
)
"""The workflow track's quick path: the model must call tools; the packaged workflow demo's
corpus, analysis and gates."""
