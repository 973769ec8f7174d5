"""Redaction of credentials, in their common encodings, from everything a run stores.

A server can echo what it received (a debugging proxy returning the request headers, an error
page quoting `Authorization: Bearer ...`), and an exception message can quote a URL or a header.
The ledger is shared as evidence, so every stored response body, error message and request is
passed through `redact` first. The secrets are the values of the environment variables the spec
names in `api_key_env`, i.e. exactly what travels in the `Authorization` / `x-api-key` headers.

A server rarely echoes a key only as it was sent: it logs it base64-encoded (a Basic header, a
JWT-like token), percent-encoded (a URL), hex-encoded (a digest-looking dump), reversed, or cut
(a "key sk-...abcd is invalid" message quoting most of it). Each of these is as good as the key
to whoever reads the ledger, so `redact` replaces them all (`encoded_forms`, and the key itself
piece by piece):

- the key itself and any piece of it at least `MIN_FRAGMENT_LENGTH` characters long;
- the key reversed;
- hex of its UTF-8 bytes, lower and upper case;
- percent-encoding: `urllib.parse.quote` (only the reserved characters) and every byte encoded
  (`%73%6B...`, upper and lower case);
- standard and URL-safe base64, with and without padding, and the part of the base64 of the
  key's bytes that does not depend on its neighbours at each of the 3 byte alignments, so a
  key inside a longer base64 text (`base64("user:" + key)`) is caught too.

Every occurrence of any form is found first and the overlapping spans merged, so a text holding
two overlapping forms (the key and a piece of it) becomes one `[REDACTED]`, with no piece of the
key left between two replacements.
"""

from __future__ import annotations

import base64
import functools
import os
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

REDACTED = "[REDACTED]"
"""What a secret value is replaced with."""

MIN_SECRET_LENGTH = 8
"""Shorter values are not redacted: replacing a 3-letter string everywhere would corrupt the
evidence, and no real API key is that short (freeze refuses keys that appear in the manifest)."""

MIN_FRAGMENT_LENGTH = 16
"""A piece of a key this long or longer is redacted wherever it appears: 16 characters are most
of a key's secret; a shorter piece (`sk-proj-`) is often a prefix every key of a provider shares,
and replacing it wherever it is quoted would corrupt the evidence."""


def secret_values(variable_names: Iterable[str | None]) -> tuple[str, ...]:
    """The values of the named environment variables that are set and long enough to redact."""
    values = {os.environ.get(name or "", "") for name in variable_names}
    # One order for one set of keys: their forms are made once per tuple (`_forms`).
    return tuple(sorted((v for v in values if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True))


def redact(text: str | None, secrets: tuple[str, ...]) -> str | None:
    """`text` with every occurrence of every secret, in any of its forms, replaced.

    The one redaction of the project: everything a run stores from a server (responses, error
    messages, reported model ids, preflight probes, trial rows) goes through it.
    """
    if text is None or not secrets:
        return text
    plain, percent = _forms(secrets)
    searched = plain + percent if "%" in text else plain
    found = [span for form in searched for span in _occurrences(text, form)]
    for secret in secrets:
        found += _piece_spans(text, secret)
    if not found:
        return text
    pieces: list[str] = []
    kept_from = 0
    for start, end in _merged(found):
        pieces += (text[kept_from:start], REDACTED)
        kept_from = end
    pieces.append(text[kept_from:])
    return "".join(pieces)


def encoded_forms(secret: str) -> set[str]:
    """The encodings of `secret` a stored text may hold (see the module docstring).

    The key itself is searched piecewise (`_piece_spans`), so it is one of these only when it
    is too short to have pieces of `MIN_FRAGMENT_LENGTH`.
    """
    raw = secret.encode("utf-8")
    forms = {secret[::-1], raw.hex(), raw.hex().upper(), quote(secret, safe="")}
    forms.add(quote_plus(secret, safe=""))
    forms.update("".join(f"%{byte:02{case}}" for byte in raw) for case in "Xx")
    forms.update(_base64_forms(raw))
    forms.discard(secret)  # `quote` of a key of unreserved characters is the key itself
    if len(secret) < MIN_FRAGMENT_LENGTH:
        forms.add(secret)
    return {form for form in forms if len(form) >= MIN_SECRET_LENGTH}


def _base64_forms(raw: bytes) -> set[str]:
    """Standard and URL-safe base64 of `raw`, whole and at each of the 3 byte alignments.

    With `shift` unknown bytes before the key, base64 character `i` covers bits `6i..6i+5`; the
    characters lying wholly within the key's bits, from `ceil(8 * shift / 6)` up to (not
    including) `floor(8 * (shift + len) / 6)`, are the same whatever surrounds the key.
    """
    forms: set[str] = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode("ascii")
        forms.update((whole, whole.rstrip("=")))
        for shift in range(3):
            encoded = encode(bytes(shift) + raw).decode("ascii")
            first = -(-8 * shift // 6)
            last = 8 * (shift + len(raw)) // 6
            forms.add(encoded[first:last])
    return forms


@functools.lru_cache(maxsize=16)
def _forms(secrets: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """All encoded forms of all `secrets`: those without a `%`, and those with one.

    Made once per run's secrets (redaction runs on every stored text); a form holding a `%`
    (percent-encoding) is searched only in a text that has one, one search instead of three.
    """
    forms = {form for secret in secrets for form in encoded_forms(secret)}
    return (tuple(f for f in forms if "%" not in f), tuple(f for f in forms if "%" in f))


def _occurrences(text: str, form: str) -> list[tuple[int, int]]:
    """The `[start, end)` spans of every occurrence of `form` in `text`."""
    spans: list[tuple[int, int]] = []
    start = text.find(form)
    while start != -1:
        spans.append((start, start + len(form)))
        start = text.find(form, start + 1)
    return spans


def _piece_spans(text: str, secret: str) -> list[tuple[int, int]]:
    """Spans of `text` holding a piece of `secret` at least `MIN_FRAGMENT_LENGTH` long.

    Any such piece contains one of the key's aligned blocks of half that length (characters
    `[k * half, (k + 1) * half)`), so only those blocks are searched, each found one grown
    both ways while text and key agree: a handful of searches per text instead of one per
    window of the key, and the whole piece redacted however long it is.
    """
    half = MIN_FRAGMENT_LENGTH // 2
    spans: list[tuple[int, int]] = []
    if len(secret) < MIN_FRAGMENT_LENGTH:
        return spans
    for in_key in range(0, len(secret) - half + 1, half):
        for found in _occurrences(text, secret[in_key : in_key + half]):
            start, end = _grown(text, found, secret, in_key)
            if end - start >= MIN_FRAGMENT_LENGTH:
                spans.append((start, end))
    return spans


def _grown(text: str, found: tuple[int, int], secret: str, in_key: int) -> tuple[int, int]:
    """The span `found` (the key's characters from `in_key` on) grown while text and key agree."""
    start, end = found
    key_end = in_key + end - start
    while start > 0 and in_key > 0 and text[start - 1] == secret[in_key - 1]:
        start, in_key = start - 1, in_key - 1
    while end < len(text) and key_end < len(secret) and text[end] == secret[key_end]:
        end, key_end = end + 1, key_end + 1
    return start, end


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` sorted, overlapping or touching ones joined."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
