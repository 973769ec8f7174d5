"""RTB track 1, reviewer comparison: reviewers, review configurations, grading, figures, audit.

The track itself is `trustbench.rtb.review.track.ReviewTrack` (registered in core as
`rtb/review`); reviewer candidates live in `trustbench.rtb.review.reviewers`.
"""
