"""RTB track 2, control-path testing: requests sent straight to an enforcement boundary.

The track is `trustbench.rtb.control.track.ControlTrack` (registered in core as `rtb/control`);
scenarios, observer-only grading, analysis, the harness self-audit and report blocks live here.
"""
