"""JSON Schemas (Draft 2020-12) of the RTB case contract, generated from the pydantic models.

The models of the corpus's policy (`CorpusPolicy.case_model`, ...) are the single source; the corpus
ships the generated documents in `schemas/` so that people and tools outside Python can check files
against the same contract. A test regenerates the documents and compares them with the shipped
files, and a property test checks that the models and the schemas accept and reject the same
documents.

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
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from trustbench.rtb.policy._protocol import CorpusPolicy

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema dialect every shipped schema declares."""

SCHEMA_FILES: tuple[str, ...] = (
    "case.schema.json",
    "candidate_input.schema.json",
    "reviewer_response.schema.json",
)
"""Shipped schema file names (under a corpus's `schemas/`), the same for every policy."""


def _policy(policy: CorpusPolicy | str | None) -> CorpusPolicy:
    if policy is None or isinstance(policy, str):
        from trustbench.rtb.policy._registry import policy_for

        return policy_for(policy)
    return policy


def schema_models(policy: CorpusPolicy | str | None = None) -> dict[str, type[BaseModel]]:
    """Schema file name -> the policy's model it is generated from."""
    chosen = _policy(policy)
    return dict(
        zip(
            SCHEMA_FILES,
            (chosen.case_model, chosen.candidate_model, chosen.response_model),
            strict=True,
        )
    )


def reason_code_vocabulary_text(policy: CorpusPolicy | str | None = None) -> str:
    """The closed reason-code vocabulary as one line per code: `code (decision): meaning`.

    Args:
        policy: The corpus policy (object or id); None for the default policy.

    Returns:
        Text used in the reviewer-response schema description (the review prompt states the
        same vocabulary in its own words).
    """
    chosen = _policy(policy)
    return "\n".join(
        f"{code} ({chosen.reason_decision[code]}): {chosen.reason_meaning[code]}"
        for code in chosen.reason_codes
    )


def build_schema(file_name: str, policy: CorpusPolicy | str | None = None) -> dict[str, Any]:
    """Generate one shipped schema document from its model.

    Args:
        file_name: One of `SCHEMA_FILES`, e.g. `case.schema.json`.
        policy: The corpus policy (object or id); None for the default policy.

    Returns:
        The Draft 2020-12 schema document, with `$schema` and a stable `$id`.
    """
    chosen = _policy(policy)
    generated = schema_models(chosen)[file_name].model_json_schema()
    definitions: dict[str, Any] = generated.get("$defs", {})
    for name in chosen.evidence_defs:
        if name in definitions:
            required = definitions[name].setdefault("required", [])
            if "kind" not in required:
                required.insert(0, "kind")
    if chosen.reason_code_def in definitions:
        definitions[chosen.reason_code_def]["description"] = (
            "Closed vocabulary of reason codes; each supports one decision.\n"
            + reason_code_vocabulary_text(chosen)
        )
    urn = chosen.schema_id_prefix + file_name.removesuffix(".schema.json")
    return {"$schema": DRAFT_2020_12, "$id": urn, **generated}


def schema_text(document: dict[str, Any]) -> str:
    """Serialize a schema the way it is shipped (stable text, so hashes are reproducible)."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def schema_documents(policy: CorpusPolicy | str | None = None) -> dict[str, dict[str, Any]]:
    """All three shipped schema documents of a policy's format, keyed by file name."""
    chosen = _policy(policy)
    return {name: build_schema(name, chosen) for name in SCHEMA_FILES}


def write_schemas(schemas_dir: Path, policy: CorpusPolicy | str | None = None) -> list[Path]:
    """Write the three schema files into `schemas_dir` (created if absent).

    Args:
        schemas_dir: A corpus's `schemas/` folder.
        policy: The corpus policy (object or id); None for the default policy.

    Returns:
        The paths written.
    """
    schemas_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, document in schema_documents(policy).items():
        path = schemas_dir / name
        path.write_text(schema_text(document), encoding="utf-8")
        written.append(path)
    return written
