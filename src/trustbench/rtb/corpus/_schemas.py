"""JSON Schemas (Draft 2020-12) of the RTB case contract, generated from the pydantic models.

The models in `_models.py` are the single source; the corpus ships the generated documents in
`schemas/` so that people and tools outside Python can check files against the same contract. A
test regenerates the documents and compares them with the shipped files, and a property test
checks that the models and the schemas accept and reject the same documents.

Two adjustments to pydantic's output keep schema and model in agreement:

- Evidence records are a discriminated union on `kind`. Pydantic gives `kind` a default (so a
  record can be built in code without it) and therefore leaves it out of `required`, but *inside*
  the union pydantic requires the discriminator. Every evidence record in a case or candidate input
  sits inside that union, so the schema requires `kind` too.
- The reason-code enum gets a description listing every code with its meaning and the decision it
  supports: the closed vocabulary is documented where a reviewer reads the response format.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from trustbench.rtb.corpus._models import (
    REASON_CODE_DECISION,
    REASON_CODE_MEANING,
    CandidateInput,
    Case,
    ReasonCode,
    ReviewerResponse,
)

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema dialect every shipped schema declares."""

SCHEMA_MODELS: dict[str, type[BaseModel]] = {
    "case.schema.json": Case,
    "candidate_input.schema.json": CandidateInput,
    "reviewer_response.schema.json": ReviewerResponse,
}
"""Shipped schema file name (under a corpus's `schemas/`) -> the v0.1 model it is generated from
(v0.2 corpora use the same file names with the models of `_formats.FORMATS`)."""


def _models_for(policy_id: str) -> dict[str, type[BaseModel]]:
    from trustbench.rtb.corpus._formats import POLICY_ID_V1, corpus_format

    if policy_id == POLICY_ID_V1:
        return SCHEMA_MODELS
    chosen = corpus_format(policy_id)
    return {
        "case.schema.json": chosen.case_model,
        "candidate_input.schema.json": chosen.candidate_model,
        "reviewer_response.schema.json": chosen.response_model,
    }


def reason_code_vocabulary_text(policy_id: str | None = None) -> str:
    """The closed reason-code vocabulary as one line per code: `code (decision): meaning`.

    Args:
        policy_id: The corpus policy; None for v0.1 (`rtb-narrow-approval-v1`).

    Returns:
        Text used in the reviewer-response schema description (the review prompt states the
        same vocabulary in its own words).
    """
    if policy_id is None:
        return "\n".join(
            f"{code.value} ({REASON_CODE_DECISION[code].value}): {REASON_CODE_MEANING[code]}"
            for code in ReasonCode
        )
    from trustbench.rtb.corpus._formats import corpus_format

    chosen = corpus_format(policy_id)
    return "\n".join(
        f"{code} ({chosen.reason_decision[code]}): {chosen.reason_meaning[code]}"
        for code in chosen.reason_codes
    )


def build_schema(file_name: str, policy_id: str | None = None) -> dict[str, Any]:
    """Generate one shipped schema document from its model.

    Args:
        file_name: A key of `SCHEMA_MODELS`, e.g. `case.schema.json`.
        policy_id: The corpus policy; None for v0.1 (whose schema text stays byte-identical).

    Returns:
        The Draft 2020-12 schema document, with `$schema` and a stable `$id`.
    """
    from trustbench.rtb.corpus._formats import FORMATS, POLICY_ID_V1

    model = _models_for(policy_id or POLICY_ID_V1)[file_name]
    generated = model.model_json_schema()
    definitions: dict[str, Any] = generated.get("$defs", {})
    for name in FORMATS[policy_id or POLICY_ID_V1].evidence_defs:
        if name in definitions:
            required = definitions[name].setdefault("required", [])
            if "kind" not in required:
                required.insert(0, "kind")
    for enum_name in ("ReasonCode", "ReasonCodeV2"):
        if enum_name in definitions:
            definitions[enum_name]["description"] = (
                "Closed vocabulary of reason codes; each supports one decision.\n"
                + reason_code_vocabulary_text(policy_id)
            )
    stem = file_name.removesuffix(".schema.json")
    urn = f"urn:trustbench:rtb:schema:{stem}"
    if policy_id is not None and policy_id != POLICY_ID_V1:
        urn = f"urn:trustbench:rtb:{policy_id}:schema:{stem}"
    return {"$schema": DRAFT_2020_12, "$id": urn, **generated}


def schema_text(document: dict[str, Any]) -> str:
    """Serialize a schema the way it is shipped (stable text, so hashes are reproducible)."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def schema_documents(policy_id: str | None = None) -> dict[str, dict[str, Any]]:
    """All three shipped schema documents of a policy's format, keyed by file name."""
    return {name: build_schema(name, policy_id) for name in SCHEMA_MODELS}


def write_schemas(schemas_dir: Path, policy_id: str | None = None) -> list[Path]:
    """Write the three schema files into `schemas_dir` (created if absent).

    Args:
        schemas_dir: A corpus's `schemas/` folder.
        policy_id: The corpus policy; None for v0.1.

    Returns:
        The paths written.
    """
    schemas_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, document in schema_documents(policy_id).items():
        path = schemas_dir / name
        path.write_text(schema_text(document), encoding="utf-8")
        written.append(path)
    return written
