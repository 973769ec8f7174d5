"""The plain response-schema check says "valid" only where jsonschema does (`_schema_check.py`).

Grading trusts its True without asking jsonschema, so every test compares it with
`jsonschema.Draft202012Validator` on the same schema: the built-in policies' response schemas
on replies of the built-in reviewers and every one-place change of them, random changes, and
small schemas with the keywords it leaves undecided.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from tests.support.child_env import child_env

from trustbench.rtb.corpus import BUILTIN_VERSIONS
from trustbench.rtb.corpus._export import to_candidate_input
from trustbench.rtb.corpus._load import builtin_corpus_root, load_corpus
from trustbench.rtb.policy._registry import policy_for, policy_of
from trustbench.rtb.review import _validation
from trustbench.rtb.review._schema_check import PlainSchema
from trustbench.rtb.review.reviewers._registry import make_reviewer, reviewer_names

CASES_PER_VERSION = 12
"""Cases of each built-in corpus whose replies are checked (every policy's schema is reached)."""

REPLACEMENTS: list[Any] = [None, True, 0, 1, 1.0, 1.5, -2, "", "x", "permit", [], ["x"], [1], {},
                           {"x": 1}]  # fmt: skip
"""Values put in place of each value of a reply: each JSON type, empty and not."""


@cache
def _schemas_and_replies() -> list[tuple[str, dict[str, Any], list[Any]]]:
    """(policy id, response schema, JSON replies of every built-in reviewer) per policy."""
    replies: dict[str, list[Any]] = {}
    for candidate_input, raw in _raw_replies():
        try:
            replies.setdefault(policy_of(candidate_input).policy_id, []).append(
                json.loads(raw or "")
            )
        except ValueError:
            continue  # no reply, or not JSON: never reaches the schema
    return [
        (policy_id, policy_for(policy_id).response_model.model_json_schema(), found)
        for policy_id, found in replies.items()
    ]


@cache
def _raw_replies() -> list[tuple[Any, str | None]]:
    """(candidate input, raw reply) of every built-in reviewer on the first cases of each corpus."""
    found = []
    for version in BUILTIN_VERSIONS:
        corpus = load_corpus(builtin_corpus_root(version))
        for case in corpus.cases[:CASES_PER_VERSION]:
            candidate_input = to_candidate_input(case, "eval-1")
            for name in reviewer_names(corpus.policy_id):
                raw = make_reviewer(name).review(corpus.review_prompt, candidate_input)
                found.append((candidate_input, raw))
    return found


def _valid_by_jsonschema(schema: dict[str, Any], instance: Any) -> bool:
    return not any(Draft202012Validator(schema).iter_errors(instance))


def _changed(value: Any) -> Iterator[Any]:
    """Every copy of `value` with one place changed: a value replaced, a key removed or added."""
    yield from REPLACEMENTS
    if isinstance(value, dict):
        for key in value:
            yield {k: v for k, v in value.items() if k != key}
            for inner in _changed(value[key]):
                yield {**value, key: inner}
        yield {**value, "unexpected": "x"}
    elif isinstance(value, list):
        for index, item in enumerate(value):
            for inner in _changed(item):
                yield [*value[:index], inner, *value[index + 1 :]]
        yield [*value, "x"]


def test_every_built_in_reviewer_reply_and_each_one_place_change_is_judged_as_jsonschema_does() -> (
    None
):
    checked = 0
    for policy_id, schema, replies in _schemas_and_replies():
        plain = PlainSchema(schema)
        assert replies, policy_id
        for reply in replies:
            for instance in [reply, *_changed(reply)]:
                expected = _valid_by_jsonschema(schema, instance)
                assert plain.valid(instance) is expected, (policy_id, instance)
                checked += 1
    assert checked > 1000


def test_the_reference_replies_of_every_policy_are_found_valid_without_jsonschema() -> None:
    for policy_id, schema, replies in _schemas_and_replies():
        valid = [reply for reply in replies if _valid_by_jsonschema(schema, reply)]
        assert valid, policy_id
        assert all(PlainSchema(schema).valid(reply) is True for reply in valid)


_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4)
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*at, index))


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    if isinstance(value, dict):
        return {**value, head: _replaced(value[head], tuple(rest), new)}
    return [*value[:head], _replaced(value[head], tuple(rest), new), *value[head + 1 :]]


def test_every_built_in_reviewer_reply_is_graded_alike_with_or_without_the_plain_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def graded() -> list[tuple[str, str | None]]:
        _validation._VALID.clear()  # replies remembered valid would skip both checks
        results = [_validation.validate_response(raw, given) for given, raw in _raw_replies()]
        return [(result.outcome.value, result.invalid_reason) for result in results]

    with_plain = graded()
    monkeypatch.setattr(PlainSchema, "valid", lambda self, instance: None)
    assert graded() == with_plain
    outcomes = {outcome for outcome, _ in with_plain}
    assert {"invalid", "missing"} <= outcomes and outcomes & {"permit", "deny", "hold"}


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_reply_changed_anywhere_to_any_json_value_is_never_valid_where_jsonschema_says_not(
    data: st.DataObject,
) -> None:
    policy_id, schema, replies = data.draw(st.sampled_from(_schemas_and_replies()))
    reply = data.draw(st.sampled_from(replies))
    path = data.draw(st.sampled_from(list(_paths(reply))))
    instance = _replaced(reply, path, data.draw(_JSON))
    verdict = PlainSchema(schema).valid(instance)
    assert verdict is _valid_by_jsonschema(schema, instance), (policy_id, instance)


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"type": "integer", "minimum": 0}, 3),  # a keyword it does not check
        ({"$ref": "#/definitions/a", "definitions": {"a": {}}}, 1),  # not under $defs
        ({"$ref": "#/$defs/a~1b", "$defs": {"a/b": {}}}, 1),  # an escaped pointer
        ({"patternProperties": {"^x": {}}, "additionalProperties": False}, {"xa": 1}),
        ({"enum": [1, "a"]}, 1),  # a member that is not a string
        ({"anyOf": [{"type": "string"}, {"minimum": 1}]}, 2),  # one branch undecided
        ({"items": [{"type": "string"}]}, ["a"]),  # the old tuple form
        ({"type": "decimal"}, 1),  # no such type
    ],
)
def test_a_keyword_it_does_not_know_leaves_the_reply_to_jsonschema(
    schema: dict[str, Any], instance: Any
) -> None:
    assert PlainSchema(schema).valid(instance) is None


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"type": "integer"}, 1.0),
        ({"type": "integer"}, True),
        ({"type": "integer"}, 10**400),
        ({"type": "number"}, False),
        ({"type": ["string", "null"]}, None),
        ({"enum": ["a", "b"]}, "b"),
        ({"enum": ["a", "b"]}, 1),
        ({"minLength": 2}, "é"),
        ({"minLength": 2}, 5),
        ({"maxLength": 1}, "ab"),
        ({"maxItems": 1}, [1, 2]),
        ({"pattern": "^a"}, "ba"),
        ({"pattern": "a"}, "ba"),
        ({"required": ["a"]}, []),
        ({"additionalProperties": {"type": "string"}, "properties": {"a": {}}}, {"a": 1, "b": 2}),
        ({"additionalProperties": True}, {"b": 2}),
        ({"items": False}, []),
        ({"items": {"type": "string"}, "minItems": 1}, ["a"]),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, 3),
        ({"$ref": "#/$defs/a", "$defs": {"a": {"type": "string"}}, "minLength": 3}, "ab"),
    ],
)
def test_a_keyword_it_knows_is_decided_as_jsonschema_decides_it(
    schema: dict[str, Any], instance: Any
) -> None:
    assert PlainSchema(schema).valid(instance) is _valid_by_jsonschema(schema, instance)


def test_a_valid_reply_is_checked_without_importing_jsonschema_and_an_invalid_one_is_worded_by_it(
    tmp_path: Path,
) -> None:
    corpus = load_corpus(builtin_corpus_root())
    candidate_input = to_candidate_input(corpus.cases[0], "eval-1")
    finding = policy_for(corpus.policy_id).reference_finding(candidate_input)
    reply = json.dumps({**finding, "evaluation_id": "eval-1"})
    probe = f"""
import json, sys
from trustbench.rtb.policy._registry import policy_for, policy_of
from trustbench.rtb.review._validation import validate_response
policy = policy_for({corpus.policy_id!r})
candidate_input = policy.candidate_model.model_validate_json({candidate_input.model_dump_json()!r})
valid = validate_response({reply!r}, candidate_input)
print("VALID", valid.outcome.value, "jsonschema" in sys.modules)
invalid = validate_response({reply.replace('"decision": "', '"decision": "x')!r}, candidate_input)
print("INVALID", invalid.outcome.value, "jsonschema" in sys.modules, invalid.invalid_reason)
"""
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True, text=True, check=True, env=child_env(tmp_path),
    )  # fmt: skip
    valid, invalid = result.stdout.strip().splitlines()[-2:]
    assert valid.split()[1] in {"permit", "deny", "hold"} and valid.endswith("False"), valid
    assert invalid.startswith("INVALID invalid True schema violation at /decision:"), invalid
