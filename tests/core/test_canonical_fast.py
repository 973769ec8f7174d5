"""The fast canonical-JSON path is byte-identical to the reference RFC 8785 implementation."""

from __future__ import annotations

import enum
import hashlib
import math

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from trustbench._canonical import canonical_json, float_text, sha256_hex
from trustbench.core._ledger import TABLE_COLUMNS, row_canonical_json
from trustbench.core._ledger_rows import values_canonical_json

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(_json)
def test_canonical_json_matches_rfc8785_byte_for_byte(value: object) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


def test_control_characters_and_non_ascii_are_encoded_as_rfc8785_does() -> None:
    value = {"\uffff": '\x00\x1f\x7f\u2028"\\/é', "\U0001f600": 1, "a": [1.0, 1e21, 1e-7, -0.0]}
    assert canonical_json(value) == rfc8785.dumps(value)


class _Colour(enum.StrEnum):
    RED = "red"


def test_subclasses_and_tuples_fall_back_to_the_reference_encoding() -> None:
    value = {"c": _Colour.RED, "t": (1, 2), "n": enum.IntEnum("N", "ONE").ONE}
    assert canonical_json(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "value", [math.nan, 2**53, "\ud800", {1: "non-string key"}, b"bytes", {"x": {1, 2}}]
)
def test_values_rfc8785_rejects_are_still_rejected(value: object) -> None:
    with pytest.raises(rfc8785.CanonicalizationError):
        canonical_json(value)


_cell = (
    st.none()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(TABLE_COLUMNS)), st.data())
def test_ledger_row_encoding_matches_the_general_canonical_encoding(table: str, data) -> None:
    row = {name: data.draw(_cell) for name in TABLE_COLUMNS[table]}
    assert row_canonical_json(table, row) == canonical_json({"table": table, **row})
    # As `verify` reads a row: its values as a tuple, in column order.
    assert values_canonical_json(table, tuple(row.values())) == canonical_json(
        {"table": table, **row}
    )


@pytest.mark.parametrize("odd", [b"blob", 2**60, True, "\ud800"])
def test_tampered_row_values_get_the_general_encoding_and_its_errors(odd: object) -> None:
    row = {name: None for name in TABLE_COLUMNS["events"]}
    row["data"] = odd
    try:
        expected: object = canonical_json({"table": "events", **row})
    except rfc8785.CanonicalizationError as error:
        expected = type(error)
    try:
        actual: object = row_canonical_json("events", row)
    except rfc8785.CanonicalizationError as error:
        actual = type(error)
    try:
        from_values: object = values_canonical_json("events", tuple(row.values()))
    except rfc8785.CanonicalizationError as error:
        from_values = type(error)
    assert actual == from_values == expected


@pytest.mark.parametrize(
    "value", [0.0, -0.0, 2.0, 1e21, 1e-7, 0.05, 2**53 - 1, -(2**53) + 1, '\x00"é\u2028', None]
)
def test_row_values_near_the_fast_path_edges_encode_as_the_general_path(value: object) -> None:
    row = {name: value for name in TABLE_COLUMNS["trials"]}
    assert values_canonical_json("trials", tuple(row.values())) == canonical_json(
        {"table": "trials", **row}
    )


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_text_is_the_rfc8785_number_format(value: float) -> None:
    assert float_text(value) == rfc8785.dumps(value).decode()


@pytest.mark.parametrize("size", [0, 1, 2047, 2048, 4094, 4095, 6718, 100_000])
def test_sha256_hex_in_gil_keeping_chunks_equals_hashlib_at_every_size(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    "value", [0.0, -0.0, 2.0, -2.0, 2.0**53 - 1, 2.0**53, 1e20, 9.999999999999999e20, 1e21]
)
def test_integral_floats_near_the_fast_path_edges_are_written_as_rfc8785_writes_them(
    value: float,
) -> None:
    assert float_text(value) == rfc8785.dumps(value).decode()


def test_a_long_string_encoded_again_from_the_memo_is_still_rfc8785() -> None:
    prompt = 'Decide whether the change may proceed.\n\t"quoted" \\ é \x01 ' * 60
    body = {"messages": [{"role": "system", "content": prompt}], "temperature": 0.0}
    first = canonical_json(body)
    assert canonical_json(body) == first == rfc8785.dumps(body)
    # An equal string that is another object, and one that differs in its last character.
    assert canonical_json({"c": "".join(list(prompt))}) == rfc8785.dumps({"c": prompt})
    assert canonical_json({"c": prompt[:-1] + "!"}) == rfc8785.dumps({"c": prompt[:-1] + "!"})


def test_the_encoded_string_memo_stays_bounded() -> None:
    from trustbench import _canonical

    for index in range(3 * _canonical._MEMO_ENTRIES):
        text = f"{index:08d}" * 200
        assert canonical_json(text) == rfc8785.dumps(text)
    assert len(_canonical._encoded_long_strings) <= _canonical._MEMO_ENTRIES
    huge = "x" * (_canonical._MEMO_MAX_CHARS + 1)
    assert canonical_json(huge) == rfc8785.dumps(huge)
    assert huge not in _canonical._encoded_long_strings
