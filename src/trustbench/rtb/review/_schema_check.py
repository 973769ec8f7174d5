"""A plain-Python check that a reply satisfies its response schema (the keywords pydantic writes).

Every reply a report grades is checked against its policy's response schema (`_validation.py`).
`jsonschema` does that check and words every reason, but importing it was about 6 % of `report`'s
wall on a 2,000-trial run (0.034 s of 0.55 s: `bench/README.md`, "Eighth pass"), although nearly
every reply of a working reviewer is valid and the response schemas use a dozen keywords. So a
reply is first checked here: `PlainSchema.valid` answers True only when every keyword on the
way is one it implements, with the meaning `jsonschema`'s draft 2020-12 validator gives it
(`jsonschema/_keywords.py`, its type checker and `_utils.equal`); anything else (a keyword it
does not know, a reference outside `$defs`, a failed check) is None or False, and the reply goes
to `jsonschema`, which decides and says why. Only True is ever trusted, and True is only given
where each keyword holds, so a reply accepted here is one `jsonschema` accepts
(`tests/rtb/test_schema_check.py` compares the two on every built-in policy's schema).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

Verdict = bool | None
"""True: valid; False: invalid; None: not decided here (`jsonschema` decides)."""

_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "$defs"})
"""Keywords that constrain nothing (`$defs` only holds what `$ref` points at)."""

_DEFS = "#/$defs/"


class PlainSchema:
    """A response schema (a JSON Schema dict, as `model_json_schema()` writes it) to check."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        definitions = schema.get("$defs", {})
        self._defs: Mapping[str, Any] = definitions if isinstance(definitions, Mapping) else {}

    def valid(self, instance: Any) -> Verdict:
        """Whether the JSON value `instance` satisfies the schema (None: not decided here)."""
        return self._check(instance, self.schema)

    def _check(self, instance: Any, schema: Any) -> Verdict:
        if schema is True or schema is False:
            return schema
        if not isinstance(schema, Mapping):
            return None
        verdict: Verdict = True
        for keyword, value in schema.items():
            if keyword in _ANNOTATIONS:
                continue
            check = _KEYWORDS.get(keyword)
            found = None if check is None else check(self, instance, value, schema)
            if found is False:
                return False
            if found is None:
                verdict = None
        return verdict

    def _ref(self, instance: Any, ref: Any, _: Mapping[str, Any]) -> Verdict:
        if not (isinstance(ref, str) and ref.startswith(_DEFS)):
            return None
        name = ref.removeprefix(_DEFS)
        if "/" in name or "~" in name or "%" in name or name not in self._defs:
            return None  # a JSON pointer with escapes or deeper parts: jsonschema resolves it
        return self._check(instance, self._defs[name])

    def _properties(self, instance: Any, properties: Any, _: Mapping[str, Any]) -> Verdict:
        if not isinstance(instance, dict):
            return True
        if not isinstance(properties, Mapping):
            return None
        present = [(name, sub) for name, sub in properties.items() if name in instance]
        return _all(self._check(instance[name], sub) for name, sub in present)

    def _additional(self, instance: Any, extra: Any, schema: Mapping[str, Any]) -> Verdict:
        if not isinstance(instance, dict):
            return True
        known = schema.get("properties", {})
        if "patternProperties" in schema or not isinstance(known, Mapping):
            return None
        extras = [name for name in instance if name not in known]
        if extra is False:
            return not extras
        return _all(self._check(instance[name], extra) for name in extras)

    def _items(self, instance: Any, items: Any, schema: Mapping[str, Any]) -> Verdict:
        if not isinstance(instance, list):
            return True
        if "prefixItems" in schema or isinstance(items, list):
            return None
        return _all(self._check(item, items) for item in instance)

    def _any_of(self, instance: Any, branches: Any, _: Mapping[str, Any]) -> Verdict:
        if not isinstance(branches, list) or not branches:
            return None
        verdicts = [self._check(instance, branch) for branch in branches]
        if True in verdicts:
            return True
        return False if all(v is False for v in verdicts) else None


def _all(verdicts: Any) -> Verdict:
    """True when every verdict is True, False at the first False, else None."""
    decided: Verdict = True
    for verdict in verdicts:
        if verdict is False:
            return False
        if verdict is None:
            decided = None
    return decided


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    return _is_number(value) and (isinstance(value, int) or value.is_integer())


_TYPES: dict[str, Callable[[Any], bool]] = {
    "array": lambda value: isinstance(value, list),
    "boolean": lambda value: isinstance(value, bool),
    # As jsonschema's draft 2020-12 type checker: 1.0 is an integer, True is not a number.
    "integer": _is_integer,
    "null": lambda value: value is None,
    "number": _is_number,
    "object": lambda value: isinstance(value, dict),
    "string": lambda value: isinstance(value, str),
}
"""jsonschema's checks for the values `json` parses (a number of another type is "not one": a
verdict of False is never trusted)."""


def _type(_: PlainSchema, instance: Any, types: Any, __: Mapping[str, Any]) -> Verdict:
    names = [types] if isinstance(types, str) else types
    if not isinstance(names, list) or not all(name in _TYPES for name in names):
        return None
    return any(_TYPES[name](instance) for name in names)


def _required(_: PlainSchema, instance: Any, names: Any, __: Mapping[str, Any]) -> Verdict:
    if not isinstance(instance, dict):
        return True
    return all(name in instance for name in names) if isinstance(names, list) else None


def _enum(_: PlainSchema, instance: Any, members: Any, __: Mapping[str, Any]) -> Verdict:
    # `_utils.equal` compares a string with anything by `==`: decided only when every member
    # is a string (a string instance is then one of them or none; another value equals none).
    if not isinstance(members, list) or not all(type(m) is str for m in members):
        return None
    return isinstance(instance, str) and instance in members


def _size(kind: type, bound: Callable[[int, int], bool]) -> Callable[..., Verdict]:
    """A keyword bounding the length of an instance of `kind` (`minLength`, `minItems`, ...)."""

    def check(_: PlainSchema, instance: Any, limit: Any, __: Mapping[str, Any]) -> Verdict:
        if type(limit) is not int:
            return None
        return bound(len(instance), limit) if isinstance(instance, kind) else True

    return check


def _pattern(_: PlainSchema, instance: Any, pattern: Any, __: Mapping[str, Any]) -> Verdict:
    if type(pattern) is not str:
        return None
    return re.search(pattern, instance) is not None if isinstance(instance, str) else True


_KEYWORDS: dict[str, Callable[[PlainSchema, Any, Any, Mapping[str, Any]], Verdict]] = {
    "$ref": PlainSchema._ref,
    "properties": PlainSchema._properties,
    "additionalProperties": PlainSchema._additional,
    "items": PlainSchema._items,
    "anyOf": PlainSchema._any_of,
    "type": _type,
    "required": _required,
    "enum": _enum,
    "minLength": _size(str, operator.ge),
    "maxLength": _size(str, operator.le),
    "minItems": _size(list, operator.ge),
    "maxItems": _size(list, operator.le),
    "pattern": _pattern,
}
"""The keywords checked here, each as `jsonschema` reads it; any other leaves a reply undecided."""
