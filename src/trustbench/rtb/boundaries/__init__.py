"""Enforcement boundaries under test for the RTB control-path track, and the trial runner.

One interface (`Boundary`: authorize, then dispatch). Built in: `reference` (Python), `cedar`
(cedarpy, policy file shipped as package data), `review-gated` (the spec's cautionary design),
`unchecked`, `http` (a user's own service), and one known-bad boundary per fault type; a
plug-in adds a name with `register_boundary`.
"""

from __future__ import annotations

from trustbench.rtb.boundaries._http import (
    HttpBoundary,
    HttpEnvironment,
    RemoteTrialView,
    reference_service_app,
)
from trustbench.rtb.boundaries._protocol import (
    DEFAULT_ENFORCEMENT,
    Authorization,
    Boundary,
    BoundaryFactory,
    DispatchReceipt,
    Enforcement,
    PolicyFlaws,
    PolicyResult,
    enforcement_of,
    is_instrument,
)
from trustbench.rtb.boundaries._python import (
    CedarBoundary,
    PythonPolicyBoundary,
    ReviewGatedBoundary,
    Safeguards,
    UncheckedBoundary,
)
from trustbench.rtb.boundaries._registry import (
    BOUNDARIES_UNDER_TEST,
    KNOWN_BAD_FOR_FAULT,
    KNOWN_BAD_SAFEGUARDS,
    boundary_factory,
    register_boundary,
    unregister_boundary,
)
from trustbench.rtb.boundaries._target import (
    InjectAction,
    SimulatedEnvironment,
    TargetEnvironment,
    TargetSession,
)
from trustbench.rtb.boundaries._trial import TrialRun, TrialScript, run_trial

__all__ = [
    "BOUNDARIES_UNDER_TEST",
    "DEFAULT_ENFORCEMENT",
    "KNOWN_BAD_FOR_FAULT",
    "KNOWN_BAD_SAFEGUARDS",
    "Authorization",
    "Boundary",
    "BoundaryFactory",
    "CedarBoundary",
    "DispatchReceipt",
    "Enforcement",
    "HttpBoundary",
    "HttpEnvironment",
    "InjectAction",
    "PolicyFlaws",
    "PolicyResult",
    "PythonPolicyBoundary",
    "RemoteTrialView",
    "ReviewGatedBoundary",
    "Safeguards",
    "SimulatedEnvironment",
    "TargetEnvironment",
    "TargetSession",
    "TrialRun",
    "TrialScript",
    "UncheckedBoundary",
    "boundary_factory",
    "enforcement_of",
    "is_instrument",
    "reference_service_app",
    "register_boundary",
    "run_trial",
    "unregister_boundary",
]
