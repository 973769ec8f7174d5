"""`trustbench rtb review --model openai/NAME`: the reviewer track's default spec for a model.

The reviewer demo's built-in corpus (the reviewer track's default), one candidate (the model),
and the demo's analysis and gates, which are that corpus's policy's review gates. The shared
parts (parsing `--model`, writing the spec, freeze/run/report) are `rtb/_quick.py`'s.
"""

from __future__ import annotations

from pathlib import Path

from trustbench.core import ProgressReporter, ReportResult, run_spec
from trustbench.rtb._quick import QuickTrack

QUICK = QuickTrack(
    "review",
    description="Reviewer track quick check of {model}.",
    demo_spec=Path(__file__).resolve().parent.parent / "experiments" / "demo_review.toml",
    max_tokens=800,
    # The answer is the last JSON object after any reasoning (<think>, reasoning_content);
    # conflicting answers and unfinished reasoning are invalid (rtb/review/_extraction).
    default_extraction="final_json_object",
)
"""The reviewer track's quick path: the packaged reviewer demo's corpus, analysis and gates,
graded under `final_json_object` (a chat model's reply as it meant it, reasoning apart)."""


# ------------------------------------------------------------------------------------------------
# The built-in reviewer-track demo: freeze, run and report the packaged demo spec.
#
# The spec (`trustbench/rtb/experiments/demo_review.toml`) runs the reference policy, every
# sentinel and two chains in-process on the reviewer track's default built-in corpus, under the
# release gates its policy declares (`CorpusPolicy.review_gates`): no network, no key. Some
# configurations fail the gates on purpose (always-permit approves what should be denied,
# always-deny blocks legitimate work, empty and malformed never give a valid finding); the report
# names each of them. The demo shows the harness reproducing known behaviour; it measures no model.

DEMO_SPEC = Path(__file__).resolve().parent.parent / "experiments" / "demo_review.toml"
"""The packaged demo spec."""


def run_review_demo(out_dir: Path, progress: ProgressReporter | None = None) -> ReportResult:
    """Freeze, run and report the built-in reviewer demo into `out_dir`.

    Args:
        out_dir: Run folder (created; a folder holding a different frozen manifest is refused).
        progress: Progress reporter for the run (default: quiet).

    Returns:
        The report result: `html_path`, `record_path`, every gate result, and `blocked` (True
        here, by design: the sentinels fail their gates). Failed gates do not raise.
    """
    return run_spec(DEMO_SPEC, Path(out_dir), progress=progress).report
