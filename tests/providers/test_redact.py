"""Redaction catches a key in the encodings a server echoes it in, and pieces of it."""

from __future__ import annotations

import base64
from urllib.parse import quote

import pytest

from trustbench.providers._redact import MIN_FRAGMENT_LENGTH, REDACTED, redact

KEY = "sk-tb+Q9/x=Lm:7w!Rz4(pK)*8&Hs2@Vd"
"""A key with reserved characters, so its percent-encoding differs from it."""
SECRETS = (KEY,)


def _pieces_of_the_key_left(text: str) -> list[str]:
    """Every piece of KEY at least MIN_FRAGMENT_LENGTH long still in `text`."""
    span = MIN_FRAGMENT_LENGTH
    return [KEY[i : i + span] for i in range(len(KEY) - span + 1) if KEY[i : i + span] in text]


ENCODINGS = {
    "base64": base64.b64encode(KEY.encode()).decode(),
    "base64 unpadded": base64.b64encode(KEY.encode()).decode().rstrip("="),
    "urlsafe base64": base64.urlsafe_b64encode(KEY.encode()).decode(),
    "urlsafe base64 unpadded": base64.urlsafe_b64encode(KEY.encode()).decode().rstrip("="),
    "percent-encoded": quote(KEY, safe=""),
    "every byte percent-encoded": "".join(f"%{b:02X}" for b in KEY.encode()),
    "hex": KEY.encode().hex(),
    "HEX": KEY.encode().hex().upper(),
    "reversed": KEY[::-1],
}


@pytest.mark.parametrize("name", ENCODINGS)
def test_a_key_echoed_in_a_common_encoding_is_replaced_whole(name: str) -> None:
    encoded = ENCODINGS[name]
    assert not _pieces_of_the_key_left(encoded)  # a test of the encoding, not of the raw key
    assert redact(f'{{"echo": "{encoded}"}}', SECRETS) == f'{{"echo": "{REDACTED}"}}'


@pytest.mark.parametrize("prefix", [b"", b"u", b"us", b"user:"])
@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_a_key_inside_a_longer_base64_text_is_caught_at_every_alignment(
    prefix: bytes, encode: object
) -> None:
    assert callable(encode)
    text = encode(prefix + KEY.encode() + b":tail").decode()
    before, replaced, after = (redact(text, SECRETS) or "").partition(REDACTED)
    assert replaced
    # Every base64 character made of the key's bits alone is gone: at most the one or two
    # characters mixing its first and last bits with its neighbours' (and padding) are left.
    assert len(before) <= len(encode(prefix)) and len(after) <= len(encode(b":tail")) + 3


def test_a_piece_of_the_key_of_16_characters_or_more_is_redacted_whole() -> None:
    piece = KEY[3:27]
    assert redact(f"invalid key {piece}.", SECRETS) == f"invalid key {REDACTED}."
    assert redact(KEY[-16:], SECRETS) == REDACTED


def test_a_piece_shorter_than_16_characters_is_kept() -> None:
    # A shared prefix ("sk-proj-") or a 4-character tail is not the key: keep the evidence.
    assert redact(f"key {KEY[:15]} and {KEY[-4:]}", SECRETS) == f"key {KEY[:15]} and {KEY[-4:]}"


def test_overlapping_forms_become_one_replacement_with_no_piece_of_the_key_between() -> None:
    text = f"{KEY}{KEY[5:30]}|{KEY[::-1]}"
    assert redact(text, SECRETS) == f"{REDACTED}|{REDACTED}"


def test_a_text_without_the_key_is_returned_as_it_is() -> None:
    text = "sk-tb is a prefix; so is %73%6B"
    assert redact(text, SECRETS) is text
    assert redact(None, SECRETS) is None
    assert redact(KEY, ()) == KEY
