"""record.json text is exactly what json.dumps(indent=2, sort_keys=True) writes, only faster."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustbench.core.report import to_jsonable
from trustbench.core.report._record import record_json_text
from trustbench.errors import InputError

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=5), _json, max_size=5))
def test_record_text_matches_json_dumps_with_indent_and_sorted_keys(record: dict) -> None:
    expected = json.dumps(record, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    assert record_json_text(record) == expected + "\n"


def test_a_bad_value_deep_in_a_record_is_named_by_its_json_pointer() -> None:
    record = {"trials": [{"ok": 1}, {"latency": math.nan}], "a/b": {"c~": object()}}
    with pytest.raises(InputError) as raised:
        to_jsonable({"trials": record["trials"]}, "/rec")
    assert raised.value.location == "/rec/trials/1/latency"
    with pytest.raises(InputError) as raised:
        to_jsonable({"a/b": record["a/b"]})
    assert raised.value.location == "/a~1b/c~0"
    with pytest.raises(InputError) as raised:
        to_jsonable({"x": [{1: "key"}]})
    assert raised.value.location == "/x/0" and "not a string" in raised.value.message
