"""Shared harness: freezing, ledger, runner, statistics, gates and reports; knows no suite.

Tracks plug in through the `Track` protocol and the registry (`register_track`); see
`docs/experiment-spec.md` for the spec format and the run-folder contract.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

if TYPE_CHECKING:
    from trustbench.core._analysis import Analyzer, Evaluability, TrackAnalysis
    from trustbench.core._api import ExperimentResult, SpecSource, run_spec, run_spec_async
    from trustbench.core._context import CallFailed, PolicyViolation, TrialContext
    from trustbench.core._export import LedgerContents, export_ledger, open_ledger, read_ledger
    from trustbench.core._manifest import (
        CandidateRecord,
        Manifest,
        build_manifest,
        check_inputs,
        read_manifest,
        write_manifest,
    )
    from trustbench.core._plan import cross_product, trial_order
    from trustbench.core._registry import BUILTIN_TRACKS, load_track, register_track
    from trustbench.core._report_run import ReportResult, report_run
    from trustbench.core._runner import RunSummary, run_experiment, run_experiment_async
    from trustbench.core._spec import (
        AnalysisSpec,
        CandidateSpec,
        CorpusSpec,
        ExperimentSpec,
        GateSpec,
        ParticipantSpec,
        PriceSpec,
        RecommendationSpec,
        RetryPolicy,
        load_spec,
        parse_spec,
    )
    from trustbench.core._track import (
        Resolution,
        ResolvedItem,
        Track,
        TrialKey,
        TrialOutcome,
    )
    from trustbench.core._verify import VerifyReport, verify_run

__all__ = [
    "BUILTIN_TRACKS",
    "AnalysisSpec",
    "Analyzer",
    "CallFailed",
    "CandidateRecord",
    "CandidateSpec",
    "CorpusSpec",
    "Evaluability",
    "ExperimentResult",
    "ExperimentSpec",
    "GateSpec",
    "LedgerContents",
    "Manifest",
    "ParticipantSpec",
    "PolicyViolation",
    "PriceSpec",
    "RecommendationSpec",
    "ReportResult",
    "Resolution",
    "ResolvedItem",
    "RetryPolicy",
    "RunSummary",
    "SpecSource",
    "Track",
    "TrackAnalysis",
    "TrialContext",
    "TrialKey",
    "TrialOutcome",
    "VerifyReport",
    "build_manifest",
    "check_inputs",
    "cross_product",
    "export_ledger",
    "load_spec",
    "load_track",
    "open_ledger",
    "parse_spec",
    "read_ledger",
    "read_manifest",
    "register_track",
    "report_run",
    "run_experiment",
    "run_experiment_async",
    "run_spec",
    "run_spec_async",
    "trial_order",
    "verify_run",
    "write_manifest",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
