"""Shared harness: freezing, ledger, runner, statistics, gates and reports; knows no suite.

Tracks plug in through the `Track` protocol and the registry (`register_track`); see
`docs/experiment-spec.md` for the spec format and the run-folder contract. This is the one public
home of core's names besides its public modules (`figures`, `gates`, `stats`, `report`): the
ledger (`Ledger`, `read_ledger`, `write_head`, ...), a track's analysis (`TrackAnalysis`,
`Evaluability`, `reduce_events`, ...), run folders (`check_output_folder`, `RunLock`, `utc_now`,
progress reporters, `entry_code_items`) and a record's in-toto statement
(`check_record_statement`, `pae`). `PriceSpec` lives in `trustbench.providers`.
"""

from __future__ import annotations

from trustbench.core._analysis import VALID_RESPONSE_RATE, Analyzer, Evaluability, TrackAnalysis
from trustbench.core._api import ExperimentResult, SpecSource, run_spec, run_spec_async
from trustbench.core._attestation import REMOVED_KEY_ENV, STATEMENT_FILE, check_record_statement
from trustbench.core._candidate_code import entry_code_items
from trustbench.core._clock import utc_now
from trustbench.core._context import (
    CallFailed,
    PolicyViolation,
    TrialContext,
    build_provider,
    candidate_entry,
    declared_variables,
)
from trustbench.core._evaluability import (
    not_evaluable_reason,
    not_evaluable_subjects,
    withheld_figure,
)
from trustbench.core._export import LedgerContents, export_ledger, open_ledger, read_ledger
from trustbench.core._figures_from_counts import EventReducer, TrialEvent, reduce_events
from trustbench.core._outputs import (
    check_output_file,
    check_output_folder,
    is_run_folder,
    is_standard_output,
    output_path,
    write_atomically,
    write_output,
)
from trustbench.core._report_run import ReportResult, report_run
from trustbench.core._run_folder import RunLock
from trustbench.core._runner import (
    CountingProgress,
    NoProgress,
    ProgressReporter,
    RunSummary,
    default_progress,
    run_experiment,
    run_experiment_async,
)
from trustbench.core._signing import (
    load_private_key,
    load_public_key,
    open_envelope,
    pae,
    sign_envelope,
)
from trustbench.core._track import (
    BUILTIN_TRACKS,
    Registry,
    Resolution,
    ResolvedItem,
    SubjectDescription,
    Track,
    TrialKey,
    TrialOutcome,
    load_track,
    register_track,
)
from trustbench.core._verify import VerifyReport, verify_run
from trustbench.core.ledger._head import write_head
from trustbench.core.ledger._store import TABLE_COLUMNS, Ledger, cache_root
from trustbench.core.spec._manifest import (
    CandidateRecord,
    Manifest,
    build_manifest,
    check_inputs,
    cross_product,
    read_manifest,
    trial_order,
    write_manifest,
)
from trustbench.core.spec._spec import (
    AnalysisSpec,
    CandidateSpec,
    CorpusSpec,
    ExperimentSpec,
    ParticipantSpec,
    RecommendationSpec,
    RetryPolicy,
    check_isolation,
    isolation_of,
    load_spec,
    parse_spec,
    runs_candidate_code,
)
from trustbench.core.spec._values import looks_like_a_key

__all__ = [
    "BUILTIN_TRACKS",
    "REMOVED_KEY_ENV",
    "STATEMENT_FILE",
    "TABLE_COLUMNS",
    "VALID_RESPONSE_RATE",
    "AnalysisSpec",
    "Analyzer",
    "CallFailed",
    "CandidateRecord",
    "CandidateSpec",
    "CorpusSpec",
    "CountingProgress",
    "Evaluability",
    "EventReducer",
    "ExperimentResult",
    "ExperimentSpec",
    "Ledger",
    "LedgerContents",
    "Manifest",
    "NoProgress",
    "ParticipantSpec",
    "PolicyViolation",
    "ProgressReporter",
    "RecommendationSpec",
    "Registry",
    "ReportResult",
    "Resolution",
    "ResolvedItem",
    "RetryPolicy",
    "RunLock",
    "RunSummary",
    "SpecSource",
    "SubjectDescription",
    "Track",
    "TrackAnalysis",
    "TrialContext",
    "TrialEvent",
    "TrialKey",
    "TrialOutcome",
    "VerifyReport",
    "build_manifest",
    "build_provider",
    "cache_root",
    "candidate_entry",
    "check_inputs",
    "check_isolation",
    "check_output_file",
    "check_output_folder",
    "check_record_statement",
    "cross_product",
    "declared_variables",
    "default_progress",
    "entry_code_items",
    "export_ledger",
    "is_run_folder",
    "is_standard_output",
    "isolation_of",
    "load_private_key",
    "load_public_key",
    "load_spec",
    "load_track",
    "looks_like_a_key",
    "not_evaluable_reason",
    "not_evaluable_subjects",
    "open_envelope",
    "open_ledger",
    "output_path",
    "pae",
    "parse_spec",
    "read_ledger",
    "read_manifest",
    "reduce_events",
    "register_track",
    "report_run",
    "run_experiment",
    "run_experiment_async",
    "run_spec",
    "run_spec_async",
    "runs_candidate_code",
    "sign_envelope",
    "trial_order",
    "utc_now",
    "verify_run",
    "withheld_figure",
    "write_atomically",
    "write_head",
    "write_manifest",
    "write_output",
]
