"""RTB track 1, reviewer comparison: reviewers, review configurations, grading, figures, audit.

The track itself is `trustbench.rtb.review.track.ReviewTrack` (registered in core as
`rtb/review`); reviewer candidates live in `trustbench.rtb.review.reviewers`. This package
exports the track's extension point: a rate (`ReviewRate`, declared over the graded
`ReviewTrialRow` and its `Outcome`) added with `register_review_metric` reaches every figure,
count, gate check and report of the track.
"""

from __future__ import annotations

from trustbench.rtb.review._rates import (
    ReviewRate,
    register_review_metric,
    unregister_review_metric,
)
from trustbench.rtb.review._rows import Outcome, ReviewTrialRow

__all__ = [
    "Outcome",
    "ReviewRate",
    "ReviewTrialRow",
    "register_review_metric",
    "unregister_review_metric",
]
