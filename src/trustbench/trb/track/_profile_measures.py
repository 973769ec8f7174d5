"""The TRB measures of Tracks 2, 4, 5 and 6 in the `trb/profile` track.

They reuse the library tracks (`trustbench.trb.measures`) cut per trace: each `run` measures one
trace through the (recording) adapter and returns per-trace counts, and `figures` pools the
rows of one adapter and split with trace-clustered percentile bootstraps. Differences from the
whole-split library functions, chosen so a trial stays one trace:

- Track 2 (grounding): per trace and concept, one context where the concept is false (the
  first such step at or after `t = len(trace_id) % T`, a fixed rule); scores at the headline
  setting only (last hooked layer, alpha = 1, against the null and a norm-matched random
  direction seeded by trace). Directions come from `grounding_fit_traces` train traces, once
  per model. Adapters without activation access are "not run" on this axis.
- Track 4 (viability): `viability_rollouts` episodes per trace per condition, common random
  numbers seeded by (adapter seed, trace id); retention ratios are ratios of pooled sums.
- Track 5 (navigability): one start per trace, steered toward the goal it was not cued with,
  against the no-r ablation; lift = mean over starts of (steered - ablated) reach probability.
- Track 6 (transfer): derived, not measured per trace: for every other measure's headline,
  the minimum over the run's non-eval splits (the transfer contexts) with that split's
  interval, and the drop from eval. The axis value is the minimum of G.

A measure that does not apply to an adapter (no white box, no ablation) returns
`{"applicable": false, "why": ...}` and its figures are "not run"; a hook that fails inside
a rollout is counted against the adapter by the library code (episode not completed, TV 1).
"""

from __future__ import annotations

from trustbench.trb.track._grounding_measure import (
    GroundingMeasure,
)
from trustbench.trb.track._navigability_measure import (
    NavigabilityMeasure,
)
from trustbench.trb.track._transfer_measure import (
    TransferMeasure,
)
from trustbench.trb.track._viability_measure import (
    ViabilityMeasure,
)

GROUNDING = GroundingMeasure()
"""The built-in Track 2 measure."""
VIABILITY = ViabilityMeasure()
"""The built-in Track 4 measure."""
NAVIGABILITY = NavigabilityMeasure()
"""The built-in Track 5 measure."""
TRANSFER = TransferMeasure()
"""The built-in Track 6 measure."""
