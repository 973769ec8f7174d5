"""The five spec §4 baselines on every track, the reference run and the profile vector (§5)."""

from __future__ import annotations

from trustbench.trb.profile._run import (
    BASELINES,
    FULL_CONFIG,
    PROFILE_SMOKE_CONFIG,
    SMOKE_CONFIG,
    TRACKS,
    ProfileConfig,
    RunConfig,
    profile_smoke_run,
    run_profile,
    run_reference,
    smoke_run,
)
from trustbench.trb.profile._vector import flags, profile_svg

__all__ = [
    "BASELINES",
    "FULL_CONFIG",
    "PROFILE_SMOKE_CONFIG",
    "SMOKE_CONFIG",
    "TRACKS",
    "ProfileConfig",
    "RunConfig",
    "flags",
    "profile_smoke_run",
    "profile_svg",
    "run_profile",
    "run_reference",
    "smoke_run",
]
