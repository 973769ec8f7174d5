"""TRB, the Trace AI Reflection Benchmark: does a self-representation govern action?

Public API: the adapter contract (`Adapter`, `AdapterTier`, `SelfReport`, `StepContext`,
`OverrideUnsupported`), the exact reference world, the corpus format, the tracks (1 and 3
here; 2, 4, 5, 6 in `trustbench.trb.measures`), the proxy adapters (`trustbench.trb.proxy`),
the governance gap, the oracle audit, the conformance kit, the reference run and the
five-baseline profile (`run_profile`, `ProfileConfig`, `FULL_CONFIG`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

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
    from trustbench.trb.corpus._format import (
        Attribution,
        CorpusManifest,
        Counterfactual,
        ProvenanceShare,
        Step,
        Trace,
        corpus_json_schema,
    )
    from trustbench.trb.corpus._generate import generate_reference_corpus, generate_split
    from trustbench.trb.corpus._provenance import check_cap, provenance_share
    from trustbench.trb.corpus._store import (
        assert_trainable,
        manifest_for,
        read_corpus,
        write_corpus,
    )
    from trustbench.trb.instruments._oracles import (
        AlwaysSelfOracle,
        EpiphenomenalOracle,
        GovernedOracle,
        OutcomeOnlyOracle,
        UniformOracle,
        audit,
        expected_g,
    )
    from trustbench.trb.measures._gap import cluster_bootstrap, governance_gap
    from trustbench.trb.measures._governance import (
        attribution_rows,
        governance_rows,
        summarize_attribution,
        summarize_governance,
    )
    from trustbench.trb.profile._baselines import TRACKS, ProfileConfig, run_profile
    from trustbench.trb.profile._run import (
        BASELINES,
        FULL_CONFIG,
        PROFILE_SMOKE_CONFIG,
        SMOKE_CONFIG,
        RunConfig,
        profile_smoke_run,
        run_reference,
        smoke_run,
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

__getattr__, __dir__ = lazy_exports(__name__, __file__)
