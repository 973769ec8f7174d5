"""The RTB corpus: case contract, schemas, loading and validation, candidate export, leak scan.

`load_corpus` / `validate_corpus` read a corpus folder (the built-in starter by default),
`export_candidate_inputs` prepares what reviewers see, and `find_leaks` with `grader_only_values`
scans any candidate-visible payload for answer-key information.
"""

from __future__ import annotations

from trustbench.rtb.corpus._export import (
    EvaluationMap,
    ExportResult,
    export_candidate_inputs,
    load_evaluation_map,
    new_evaluation_id,
    to_candidate_input,
)
from trustbench.rtb.corpus._leakscan import (
    ANSWER_KEY_FIELDS,
    Leak,
    find_leaks,
    grader_only_values,
)
from trustbench.rtb.corpus._load import (
    BUILTIN_VERSION,
    BUILTIN_VERSIONS,
    Corpus,
    CorpusCounts,
    CorpusManifest,
    ValidationReport,
    builtin_corpus_root,
    load_corpus,
    schema_documents,
    validate_corpus,
    write_manifest,
)
from trustbench.rtb.corpus._models import (
    REASON_CODE_DECISION,
    VARIANT_REFERENCE,
    ApprovalRecord,
    CandidateInput,
    Case,
    Decision,
    DomainGroup,
    Expectations,
    PolicyRecord,
    Problem,
    Proposal,
    ReasonCode,
    ResourceStateRecord,
    ReviewerResponse,
    ServiceNoticeRecord,
    Variant,
)

__all__ = [
    "ANSWER_KEY_FIELDS",
    "BUILTIN_VERSION",
    "BUILTIN_VERSIONS",
    "REASON_CODE_DECISION",
    "VARIANT_REFERENCE",
    "ApprovalRecord",
    "CandidateInput",
    "Case",
    "Corpus",
    "CorpusCounts",
    "CorpusManifest",
    "Decision",
    "DomainGroup",
    "EvaluationMap",
    "Expectations",
    "ExportResult",
    "Leak",
    "PolicyRecord",
    "Problem",
    "Proposal",
    "ReasonCode",
    "ResourceStateRecord",
    "ReviewerResponse",
    "ServiceNoticeRecord",
    "ValidationReport",
    "Variant",
    "builtin_corpus_root",
    "export_candidate_inputs",
    "find_leaks",
    "grader_only_values",
    "load_corpus",
    "load_evaluation_map",
    "new_evaluation_id",
    "schema_documents",
    "to_candidate_input",
    "validate_corpus",
    "write_manifest",
]
