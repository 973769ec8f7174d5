"""Strict JSON reading and schema checking that report problems as file + JSON pointer.

Every corpus file is read the same way: UTF-8 only, no duplicate keys (JSON parsers silently keep
the last one, which would let two readers see different values), no `NaN`/`Infinity`. Schema
errors are reported at the JSON pointer of the offending value, descending into `oneOf` failures
to the branch the document evidently meant, so an author sees `/evidence/1/status` rather than
"not valid under any of the given schemas".
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trustbench._canonical import DuplicateKeyError, refuse_duplicate_keys
from trustbench.rtb.corpus._problem import Problem, json_pointer
from trustbench.rtb.corpus._schemas import schema_documents

if TYPE_CHECKING:  # jsonschema is imported where a document is validated, not by `run`'s imports
    import jsonschema
    from jsonschema.exceptions import ValidationError as SchemaError

_MAX_MESSAGE = 240


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


NESTED_TOO_DEEPLY = "JSON nested too deeply to read (beyond Python's recursion limit)"
"""The problem reported for a file whose nesting would exhaust the parser or the validator."""


def read_json(root: Path, rel: str, problems: list[Problem]) -> Any | None:
    """Parse a corpus JSON file strictly (UTF-8, no duplicate keys, no NaN); None on a problem."""
    return parse_json(rel, (root / rel).read_bytes(), problems)


def parse_json(rel: str, data: bytes, problems: list[Problem]) -> Any | None:
    """Parse the bytes of corpus file `rel` as `read_json` does; None on a problem."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        problems.append(Problem(file=rel, message=f"not UTF-8 text ({error.reason})"))
        return None
    try:
        return json.loads(
            text, object_pairs_hook=refuse_duplicate_keys, parse_constant=_reject_constant
        )
    except json.JSONDecodeError as error:
        message = f"not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
        problems.append(Problem(file=rel, message=message))
    except DuplicateKeyError as error:
        problems.append(Problem(file=rel, message=f"duplicate JSON key {error.args[0]!r}"))
    except RecursionError:
        problems.append(Problem(file=rel, message=NESTED_TOO_DEEPLY))
    except ValueError as error:
        problems.append(Problem(file=rel, message=f"not valid JSON: {error}"))
    return None


@cache
def _validator(schema_name: str, policy_id: str | None = None) -> jsonschema.Draft202012Validator:
    import jsonschema

    return jsonschema.Draft202012Validator(schema_documents(policy_id)[schema_name])


_MEMO_SIZE = 4096
"""Documents whose schema findings are remembered (a bound: past it the memo starts again)."""
_memo: dict[tuple[str, str | None, str], tuple[tuple[str, str], ...]] = {}


def schema_problems(
    rel: str, document: Any, schema_name: str, policy_id: str | None = None
) -> list[Problem]:
    """Problems of a document against one of the three schemas, each with its JSON pointer.

    `policy_id` picks the policy's format (None: the default policy).

    Validation is a pure function of the schema and the document, and it is most of reading a
    corpus (about 17 ms a case of the default corpus): one process validates the same case when
    it checks a corpus, loads it and exports it, and every load of a built-in corpus again. So
    the findings are remembered per document text (its key order included, which fixes the
    order of the findings); a document that does not serialise is validated every time.
    """
    try:
        key = (schema_name, policy_id, json.dumps(document, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError):
        return [_problem(rel, found) for found in _findings(document, schema_name, policy_id)]
    findings = _memo.get(key)
    if findings is None:
        findings = _findings(document, schema_name, policy_id)
        if len(_memo) >= _MEMO_SIZE:
            _memo.clear()
        _memo[key] = findings
    return [_problem(rel, found) for found in findings]


def _problem(rel: str, found: tuple[str, str]) -> Problem:
    return Problem(file=rel, pointer=found[0], message=found[1])


def _findings(
    document: Any, schema_name: str, policy_id: str | None
) -> tuple[tuple[str, str], ...]:
    """(JSON pointer, message) of each schema problem of `document`, in reporting order."""
    try:
        errors = sorted(
            _validator(schema_name, policy_id).iter_errors(document),
            key=lambda e: [str(p) for p in e.path],
        )
    except RecursionError:
        return (("", NESTED_TOO_DEEPLY),)
    return tuple(
        (json_pointer(leaf.absolute_path), f"schema: {_shorten(leaf.message)}")
        for error in errors
        for leaf in _specific(error)
    )


def _specific(error: SchemaError) -> list[SchemaError]:
    """Descend into a `oneOf`/`anyOf` failure to the branch the document evidently meant.

    An evidence record that fails names its branch through `kind`: the branches whose `kind`
    constant did not match are noise, the remaining branch holds the useful errors.
    """
    if not error.context:
        return [error]
    branches: dict[Any, list[SchemaError]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    meant = [
        subs
        for subs in branches.values()
        if not any(s.validator == "const" and list(s.relative_path) == ["kind"] for s in subs)
    ]
    if len(meant) == 1:
        return [leaf for sub in meant[0] for leaf in _specific(sub)]
    kinds = sorted(
        {
            str(s.validator_value)
            for s in error.context
            if s.validator == "const" and list(s.relative_path) == ["kind"]
        }
    )
    if kinds and not meant:
        error.message = f"evidence record `kind` must be one of {', '.join(map(repr, kinds))}"
    return [error]


def _shorten(message: str) -> str:
    return message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 3] + "..."
