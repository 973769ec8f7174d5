"""The sizes the reference profile and a `trb/profile` run share, declared once.

`ProfileConfig` (the library's reference run) and `TrbTrackOptions` (a spec's `track_options`)
both build on `ProfileSizes`, so the library's profile and the track's measure the same way.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from trustbench.trb.reference._token_world import TokenLMConfig

MEASURES: tuple[str, ...] = (
    "governance", "grounding", "attribution", "viability", "navigability", "transfer",
)  # fmt: skip
"""The registered TRB measures of the profile vector, by default (one per axis)."""


class ProfileSizes(BaseModel):
    """The proxy baselines' LMs and the sizes of Tracks 2, 4 and 5."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

    token_lm: TokenLMConfig = TokenLMConfig()
    """Size and training of the proxy baselines' token-world LMs (`proxy:*` adapters; all three
    share the size)."""
    lm_train_traces: StrictInt = Field(default=800, ge=10)
    """Train traces the proxy baselines' LMs see (the first N of the train split)."""
    grounding_fit_traces: StrictInt = Field(default=200, ge=10)
    """Train traces Track 2's concept directions and the Tracks 4/5 no-r arm's mean r come from."""
    viability_rollouts: StrictInt = Field(default=4, ge=1)
    """Track 4 episodes per trace per condition (r-mediated and ablated)."""
    navigation_samples: StrictInt = Field(default=16, ge=1)
    """Track 5 Monte Carlo rollouts per start when exact enumeration is too large."""
    max_enumeration_nodes: StrictInt = Field(default=1000, ge=1)
    """Largest exact enumeration in Track 5 (decision contexts per start)."""
