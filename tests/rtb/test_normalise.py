"""The corpus policy's normalisation: equivalent encodings compare equal, different values never."""

from __future__ import annotations

import pytest

from trustbench.rtb.corpus._normalise import equivalent


@pytest.mark.parametrize(
    ("left", "right"),
    [("22", 22), (" 22 ", 22), ("Api.Example.com.", "api.example.com"), (["b", "a"], ["a", "b"]),
     (["443", 80], [80, 443]), ("eu-west-1", "eu-west-1")],
)  # fmt: skip
def test_equivalent_encodings_compare_equal(left: object, right: object) -> None:
    assert equivalent(left, right)


@pytest.mark.parametrize(
    ("left", "right"),
    [(True, 1), ([True], [1]), ("45", 7), ("api.example.com", "api.example.org"),
     (["a"], ["a", "a"]), ("10.0.0.1", "10.0.0.2"), ("seven", 7), (None, "")],
)  # fmt: skip
def test_different_values_never_compare_equal(left: object, right: object) -> None:
    assert not equivalent(left, right)


@pytest.mark.parametrize(
    ("left", "right"),
    [("2026-06-10T07:00:00+02:00", "2026-06-10T05:00:00Z"),
     ("2026-06-10T05:00:00z", " 2026-06-10T05:00:00+00:00 "),
     ("2026-06-09T22:00:00-07:00", "2026-06-10T05:00:00.000+00:00")],
)  # fmt: skip
def test_one_instant_in_any_utc_offset_compares_equal(left: str, right: str) -> None:
    assert equivalent(left, right)


@pytest.mark.parametrize(
    ("left", "right"),
    [("2026-06-10T07:00:00+02:00", "2026-06-10T07:00:00Z"),
     ("2026-06-10T05:00:00", "2026-06-10T05:00:00Z"),
     ("2026-06-10", "2026-06-10T00:00:00Z")],
)  # fmt: skip
def test_different_instants_or_a_time_without_offset_never_compare_equal(
    left: str, right: str
) -> None:
    assert not equivalent(left, right)
