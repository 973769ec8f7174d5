"""Internals of the RTB reviewer track (`trustbench.rtb.review_track`).

Options, grading, figures, paired comparisons and the built-in demo.
"""
