"""The TRB corpus: traces, counterfactuals, provenance (synthetic cap), storage, generation."""

from __future__ import annotations

from trustbench.trb.corpus._format import (
    Attribution,
    CorpusManifest,
    Counterfactual,
    ProvenanceShare,
    SlotCounterfactual,
    SlotStep,
    SlotTrace,
    Step,
    Trace,
    corpus_json_schema,
)
from trustbench.trb.corpus._generate import (
    TRANSFER_FAMILIES,
    generate_reference_corpus,
    generate_split,
)
from trustbench.trb.corpus._store import (
    assert_trainable,
    check_cap,
    manifest_for,
    provenance_share,
    read_corpus,
    read_corpus_of_any_world,
    write_corpus,
)

__all__ = [
    "TRANSFER_FAMILIES",
    "Attribution",
    "CorpusManifest",
    "Counterfactual",
    "ProvenanceShare",
    "SlotCounterfactual",
    "SlotStep",
    "SlotTrace",
    "Step",
    "Trace",
    "assert_trainable",
    "check_cap",
    "corpus_json_schema",
    "generate_reference_corpus",
    "generate_split",
    "manifest_for",
    "provenance_share",
    "read_corpus",
    "read_corpus_of_any_world",
    "write_corpus",
]
