"""The three shipped JSON Schemas and the pydantic models are one contract."""

import copy
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from trustbench.rtb.corpus import (
    CandidateInput,
    Case,
    ReasonCode,
    ReviewerResponse,
    builtin_corpus_root,
    load_corpus,
    schema_documents,
    to_candidate_input,
)

SCHEMAS = {
    "case.schema.json": Case,
    "candidate_input.schema.json": CandidateInput,
    "reviewer_response.schema.json": ReviewerResponse,
}

SEED_RESPONSE = {
    "evaluation_id": "example-retention-review",
    "decision": "deny",
    "reason_codes": ["proposal_outside_approved_parameters"],
    "evidence_refs": ["approval-backup_retention", "policy-backup_retention"],
    "explanation": (
        "The approval permits forty-five days of retention. The proposal requests seven days."
    ),
}


def _shipped(name: str) -> dict[str, Any]:
    return json.loads((builtin_corpus_root() / "schemas" / name).read_text())


def test_shipped_schemas_equal_the_schemas_generated_from_the_models() -> None:
    assert {name: _shipped(name) for name in SCHEMAS} == schema_documents()


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_shipped_schema_is_a_valid_draft_2020_12_schema(name: str) -> None:
    schema = _shipped(name)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_reviewer_response_schema_documents_the_closed_reason_code_vocabulary() -> None:
    schema = _shipped("reviewer_response.schema.json")
    reason = schema["$defs"]["ReasonCode"]
    assert reason["enum"] == [code.value for code in ReasonCode]
    for code in ReasonCode:
        assert code.value in reason["description"]
    assert schema["properties"]["decision"]["$ref"].endswith("Decision")
    assert schema["$defs"]["Decision"]["enum"] == ["permit", "deny", "hold"]


def test_seed_example_response_matches_the_reviewer_response_schema_and_model() -> None:
    jsonschema.validate(SEED_RESPONSE, _shipped("reviewer_response.schema.json"))
    ReviewerResponse.model_validate(SEED_RESPONSE)


def test_response_with_missing_field_or_unknown_code_fails_schema_and_model() -> None:
    schema = _shipped("reviewer_response.schema.json")
    for broken in (
        {k: v for k, v in SEED_RESPONSE.items() if k != "evidence_refs"},
        {**SEED_RESPONSE, "reason_codes": ["looks_fine"]},
        {**SEED_RESPONSE, "decision": "missing"},
        {**SEED_RESPONSE, "explanation": ""},
    ):
        assert not jsonschema.Draft202012Validator(schema).is_valid(broken)
        with pytest.raises(ValidationError):
            ReviewerResponse.model_validate(broken)


def test_every_exported_candidate_input_matches_the_candidate_schema() -> None:
    validator = jsonschema.Draft202012Validator(_shipped("candidate_input.schema.json"))
    for case in load_corpus().cases:
        document = to_candidate_input(case, "rtb-test").model_dump(mode="json")
        assert list(validator.iter_errors(document)) == [], case.case_id


# --- property: schema and model accept and reject the same documents -------------------------

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-10, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _paths(child, (*prefix, index))
    return found


def _mutate(document: Any, data: st.DataObject) -> Any:
    mutated = copy.deepcopy(document)
    path = data.draw(st.sampled_from(_paths(mutated)[1:]))
    parent = mutated
    for part in path[:-1]:
        parent = parent[part]
    action = data.draw(st.sampled_from(["replace", "delete", "add_key", "set_string"]))
    if action == "replace":
        parent[path[-1]] = data.draw(_json)
    elif action == "set_string":
        parent[path[-1]] = data.draw(st.sampled_from(["", "x\n", "active", "revoked", "permit"]))
    elif action == "delete":
        del parent[path[-1]]
    elif isinstance(parent[path[-1]], dict):
        parent[path[-1]][data.draw(st.text(max_size=6))] = data.draw(_json)
    return mutated


def _bases() -> list[tuple[str, dict[str, Any]]]:
    corpus = load_corpus()
    picks = [
        corpus.case("backup_retention-04-revoked_approval"),
        corpus.case("dns_changes-05-unavailable_approval_evidence"),
    ]
    bases = [("case.schema.json", c.model_dump(mode="json")) for c in picks]
    bases += [
        ("candidate_input.schema.json", to_candidate_input(c, "rtb-x").model_dump(mode="json"))
        for c in picks
    ]
    bases.append(("reviewer_response.schema.json", SEED_RESPONSE))
    return bases


BASES = _bases()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_schema_and_model_accept_and_reject_the_same_mutated_documents(data: st.DataObject) -> None:
    name, base = data.draw(st.sampled_from(BASES))
    document = _mutate(base, data)
    model: type[BaseModel] = SCHEMAS[name]
    schema_ok = jsonschema.Draft202012Validator(_shipped(name)).is_valid(document)
    try:
        model.model_validate_json(json.dumps(document))
        model_ok = True
    except ValidationError:
        model_ok = False
    event(f"schema_ok={schema_ok}")
    assert schema_ok == model_ok, (name, document)
