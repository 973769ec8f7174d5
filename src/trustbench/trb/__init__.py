"""TRB, the Trace AI Reflection Benchmark: does a self-representation govern action?

Public API: the adapter contract (`Adapter`, `AdapterTier`, `SelfReport`, `StepContext`,
`OverrideUnsupported`), the exact reference world, the corpus format, the tracks (1 and 3
here; 2, 4, 5, 6 in `trustbench.trb.tracks`), the proxy adapters (`trustbench.trb.proxy`),
the governance gap, the oracle audit, the conformance kit, the reference run and the
five-baseline profile (`run_profile`, `ProfileConfig`, `FULL_CONFIG`).
"""

from trustbench.trb._adapter import Adapter, AdapterTier, OverrideUnsupported
from trustbench.trb._baselines import TRACKS, ProfileConfig, run_profile
from trustbench.trb._conformance import ConformanceCheck, check_adapter, load_factory
from trustbench.trb._corpus import (
    Attribution,
    CorpusManifest,
    Counterfactual,
    ProvenanceShare,
    Step,
    Trace,
    corpus_json_schema,
)
from trustbench.trb._gap import cluster_bootstrap, governance_gap
from trustbench.trb._generate import generate_reference_corpus, generate_split
from trustbench.trb._oracles import (
    AlwaysSelfOracle,
    EpiphenomenalOracle,
    GovernedOracle,
    OutcomeOnlyOracle,
    UniformOracle,
    audit,
    expected_g,
)
from trustbench.trb._provenance import check_cap, provenance_share
from trustbench.trb._run import (
    BASELINES,
    FULL_CONFIG,
    PROFILE_SMOKE_CONFIG,
    SMOKE_CONFIG,
    RunConfig,
    profile_smoke_run,
    run_reference,
    smoke_run,
)
from trustbench.trb._schema import ACTIONS, TRB_VERSION, Observation, SelfReport, StepContext
from trustbench.trb._store import assert_trainable, manifest_for, read_corpus, write_corpus
from trustbench.trb._tracks import (
    attribution_rows,
    governance_rows,
    summarize_attribution,
    summarize_governance,
)

__all__ = [
    "ACTIONS",
    "BASELINES",
    "FULL_CONFIG",
    "PROFILE_SMOKE_CONFIG",
    "SMOKE_CONFIG",
    "TRACKS",
    "TRB_VERSION",
    "Adapter",
    "AdapterTier",
    "AlwaysSelfOracle",
    "Attribution",
    "ConformanceCheck",
    "CorpusManifest",
    "Counterfactual",
    "EpiphenomenalOracle",
    "GovernedOracle",
    "Observation",
    "OutcomeOnlyOracle",
    "OverrideUnsupported",
    "ProfileConfig",
    "ProvenanceShare",
    "RunConfig",
    "SelfReport",
    "Step",
    "StepContext",
    "Trace",
    "UniformOracle",
    "assert_trainable",
    "attribution_rows",
    "audit",
    "check_adapter",
    "check_cap",
    "cluster_bootstrap",
    "corpus_json_schema",
    "expected_g",
    "generate_reference_corpus",
    "generate_split",
    "governance_gap",
    "governance_rows",
    "load_factory",
    "manifest_for",
    "profile_smoke_run",
    "provenance_share",
    "read_corpus",
    "run_profile",
    "run_reference",
    "smoke_run",
    "summarize_attribution",
    "summarize_governance",
    "write_corpus",
]
