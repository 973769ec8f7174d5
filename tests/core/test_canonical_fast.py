"""Canonical JSON is `rfc8785.dumps`, and the ledger's row encoders write the same bytes."""

from __future__ import annotations

import hashlib
import math

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from trustbench._canonical import canonical_json, sha256_hex
from trustbench.core.ledger._chain import values_canonical_json
from trustbench.core.ledger._store import TABLE_COLUMNS, row_canonical_json


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


_EVENT = {"id": 4, "seq": 4, "at": "2026-12-06T22:00:00+00:00", "kind": "k", "data": "{}"}


@pytest.mark.parametrize(
    "row",
    [
        {**_EVENT, "table": "spoofed"},  # a member named as the constant one
        {**_EVENT, "extra": 1},  # one member too many
        {**{k: v for k, v in _EVENT.items() if k != "kind"}, "note": None},  # one in place of kind
        {k: v for k, v in _EVENT.items() if k != "kind"},  # one too few
    ],
)
def test_a_row_of_other_members_than_its_columns_gets_the_general_encoding(
    row: dict[str, object],
) -> None:
    assert row_canonical_json("events", row) == canonical_json({"table": "events", **row})


@pytest.mark.parametrize(
    "value", [0.0, -0.0, 2.0, 1e21, 1e-7, 0.05, 2**53 - 1, -(2**53) + 1, '\x00"é\u2028', None]
)
def test_row_values_near_the_fast_path_edges_encode_as_the_general_path(value: object) -> None:
    row = {name: value for name in TABLE_COLUMNS["trials"]}
    assert values_canonical_json("trials", tuple(row.values())) == canonical_json(
        {"table": "trials", **row}
    )


@pytest.mark.parametrize("size", [0, 1, 2047, 2048, 4094, 4095, 6718, 100_000])
def test_sha256_hex_in_gil_keeping_chunks_equals_hashlib_at_every_size(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()


_STORED_RECORD_SHAPES = {
    "table": "trials",
    "trial_id": "t-0001",
    "seq": 7,
    "attempts": 1,
    "big_int": 2**53 - 1,
    "negative_int": -(2**53) + 1,
    "duration_s": 1.5000000000000002,
    "floats": [
        *(0.0, -0.0, 1.0, 2.0, 0.1, 1e-7, 1e21, 1e20, 9.999999999999999e20, 5e-324),
        *(1.7976931348623157e308, -123456789.125, 0.05),
    ],
    "text": 'Decide.\n\t"quoted" \\ / é \x00\x01\x1f\x7f \u2028 \U0001f600',
    "nested": {
        "z": None,
        "a": [True, False, {"b": [], "a": {}}],
        "é": 1,
        "\uffff": 2,
        "\U0001f600": 3,
        "B": 4,
    },
    "outcome": None,
}
"""The shapes the ledger, manifests and records store: safe integers, floats at RFC 8785's
formatting edges, escapes and non-BMP text, members sorted by UTF-16 code units, nesting."""

_STORED_RECORD_BYTES = (
    b'{"attempts":1,"big_int":9007199254740991,"duration_s":1.5000000000000002,"floats":[0,0,1,'
    b"2,0.1,1e-7,1e+21,100000000000000000000,999999999999999900000,5e-324,"
    b'1.7976931348623157e+308,-123456789.125,0.05],"negative_int":-9007199254740991,'
    b'"nested":{"B":4,"a":[true,false,{"a":{},"b":[]}],"z":null,"\xc3\xa9":1,'
    b'"\xf0\x9f\x98\x80":3,"\xef\xbf\xbf":2},"outcome":null,"seq":7,"table":"trials",'
    b'"text":"Decide.\\n\\t\\"quoted\\" \\\\ / \xc3\xa9 \\u0000\\u0001\\u001f\x7f \xe2\x80\xa8 '
    b'\xf0\x9f\x98\x80","trial_id":"t-0001"}'
)
"""What trustbench's own encoder (before issue 47 removed it) wrote for `_STORED_RECORD_SHAPES`."""


def test_stored_record_shapes_keep_the_bytes_and_hash_ledgers_were_written_with() -> None:
    assert rfc8785.dumps(_STORED_RECORD_SHAPES) == _STORED_RECORD_BYTES
    assert canonical_json(_STORED_RECORD_SHAPES) == _STORED_RECORD_BYTES
    assert sha256_hex(_STORED_RECORD_BYTES) == (
        "032a51e1d5e58c32a43cc12c1c4c2f9b984043f27c4b9573dac0cde0b068ae75"
    )


def test_a_ledger_attempt_row_keeps_its_chained_hash() -> None:
    from trustbench.core.ledger._chain import row_hash

    row: dict[str, object] = dict.fromkeys(TABLE_COLUMNS["attempts"])
    row.update(
        id=3, seq=3, trial_id="t-0001", execution=0, call_index=0, attempt_index=0,
        kind="chat", call="review", started_at="2026-12-06T02:40:09.123456+00:00",
        request='{"messages":[{"content":"é\\n","role":"user"}],"temperature":0}',
        raw_response='{"decision":"permit"}', http_status=200, latency_s=1.5000000000000002,
        prompt_tokens=812, completion_tokens=40, cost_usd=1e-7,
    )  # fmt: skip
    assert row_hash("0" * 64, "attempts", row) == (
        "d164f643d6d671f7ede9fc219d7a295b63e020b89b0294021fa628d70db82431"
    )
