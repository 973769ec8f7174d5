"""`trustbench rtb review --model openai/NAME`: the reviewer track's default spec for a model.

The reviewer demo's built-in corpus (the reviewer track's default), one candidate (the model),
and the demo's analysis and gates, which are that corpus's policy's review gates. The shared
parts (parsing `--model`, writing the spec, freeze/run/report) are `rtb/_quick.py`'s.
"""

from __future__ import annotations

from pathlib import Path

from trustbench.rtb._quick import QuickTrack

QUICK = QuickTrack(
    "review",
    description="Reviewer track quick check of {model}.",
    demo_spec=Path(__file__).resolve().parent.parent / "experiments" / "demo_review.toml",
    max_tokens=800,
)
"""The reviewer track's quick path: the packaged reviewer demo's corpus, analysis and gates."""
