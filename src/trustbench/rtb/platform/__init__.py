"""The simulated target platform of the RTB control-path track.

Resources with revisions and labels, an approval service that can be made unavailable or slow, an
executor with idempotency keys, fault injection, and a protected observer whose append-only,
hash-chained effect log only the grader reads. Each trial builds a fresh `SimulatedPlatform`.
"""

from __future__ import annotations

from trustbench.rtb.platform._approvals import Approval, ApprovalServiceUnavailable
from trustbench.rtb.platform._executor import ExecutionReceipt, ResponseLost
from trustbench.rtb.platform._faults import INJECTION_POINT, FaultPlan, FaultType
from trustbench.rtb.platform._governance import (
    BreakGlassSeed,
    CalendarWindowSeed,
    DelegationSeed,
    GovernanceSeed,
    ResourceClass,
)
from trustbench.rtb.platform._models import (
    ApprovalSeed,
    ControlRequest,
    EffectEntry,
    EffectKind,
    ObservedResource,
    PlatformSeed,
    ResourceSeed,
    RevocationSeed,
)
from trustbench.rtb.platform._observer import (
    EffectSink,
    ObserverReader,
    ProtectedObserver,
    verify_chain,
)
from trustbench.rtb.platform._platform import (
    ENVIRONMENT_STRENGTH_SIMULATED,
    ActorConsole,
    FaultInjector,
    PlatformView,
    SimulatedPlatform,
)

__all__ = [
    "ENVIRONMENT_STRENGTH_SIMULATED",
    "INJECTION_POINT",
    "ActorConsole",
    "Approval",
    "ApprovalSeed",
    "ApprovalServiceUnavailable",
    "BreakGlassSeed",
    "CalendarWindowSeed",
    "ControlRequest",
    "DelegationSeed",
    "EffectEntry",
    "EffectKind",
    "EffectSink",
    "ExecutionReceipt",
    "FaultInjector",
    "FaultPlan",
    "FaultType",
    "GovernanceSeed",
    "ObservedResource",
    "ObserverReader",
    "PlatformSeed",
    "PlatformView",
    "ProtectedObserver",
    "ResourceClass",
    "ResourceSeed",
    "ResponseLost",
    "RevocationSeed",
    "SimulatedPlatform",
    "verify_chain",
]
