"""TRB, the Trace AI Reflection Benchmark: does a self-representation govern action?

Public API: the adapter contract (`Adapter`, `AdapterTier`, `SelfReport`, `StepContext`,
`OverrideUnsupported`), the exact reference world, the corpus format, the tracks (1 and 3
here; 2, 4, 5, 6 in `trustbench.trb.measures`), the proxy adapters (`trustbench.trb.proxy`),
the governance gap, the oracle audit and Goodhart cheats, the conformance kit, the reference run
and the five-baseline profile (`run_profile`, `ProfileConfig`, `FULL_CONFIG`, its vector's
`headlines` / `flags` / `profile_svg`). The corpus, instruments and profile names are those of
their own packages' `__all__`, re-exported whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports
from trustbench.trb import corpus, instruments, profile

if TYPE_CHECKING:
    from trustbench.trb.adapter._conformance import ConformanceCheck, check_adapter, load_factory
    from trustbench.trb.adapter._protocol import Adapter, AdapterTier, OverrideUnsupported
    from trustbench.trb.adapter._schema import (
        ACTIONS,
        TRB_VERSION,
        Observation,
        SelfReport,
        StepContext,
    )

    # The corpus, instruments and profile APIs (each listed once, in its own package):
    from trustbench.trb.corpus import *  # noqa: F403
    from trustbench.trb.instruments import *  # noqa: F403
    from trustbench.trb.measures._gap import cluster_bootstrap, governance_gap
    from trustbench.trb.measures._governance import (
        attribution_rows,
        governance_rows,
        summarize_attribution,
        summarize_governance,
    )
    from trustbench.trb.profile import *  # noqa: F403

__all__ = [
    "ACTIONS",
    "TRB_VERSION",
    "Adapter",
    "AdapterTier",
    "ConformanceCheck",
    "Observation",
    "OverrideUnsupported",
    "SelfReport",
    "StepContext",
    "attribution_rows",
    "check_adapter",
    "cluster_bootstrap",
    "governance_gap",
    "governance_rows",
    "load_factory",
    "summarize_attribution",
    "summarize_governance",
]
__all__ += corpus.__all__
__all__ += instruments.__all__
__all__ += profile.__all__

__getattr__, __dir__ = lazy_exports(__name__, __file__)
