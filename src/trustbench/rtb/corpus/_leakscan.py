"""Scan anything a candidate can see for grader-only information.

Removing the answer-key fields from a payload is not enough: a case id names its variant, and a
reason code or the decisive condition copied into a record gives the answer away. `find_leaks`
therefore checks two things anywhere in a payload (nested JSON, a file's text, environment
variables, a tool response):

1. no *key* is an answer-key field name (`reference_decision`, `expectations`, ...), and no string
   mentions one as a word;
2. no string contains a grader-only *value* of the case (`grader_only_values`).

Bare decision words (`deny`, `hold`, `permit`) are deliberately not forbidden values: they occur
legitimately in the policy text every candidate needs. An identifier-like value (no whitespace,
e.g. a case id, a variant or a reason code) matches as a whole token, case-insensitively; a
phrase (the decisive condition, authoring notes) matches as a case-insensitive substring after
collapsing whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel

from trustbench._docstrings import documented
from trustbench.rtb.corpus._models import json_pointer
from trustbench.rtb.policy._protocol import AuthoredCase

ANSWER_KEY_FIELDS: frozenset[str] = frozenset(
    {
        "case_id",
        "expectations",
        "reference_decision",
        "acceptable_reason_codes",
        "decisive_record_ids",
        "decisive_condition",
        "explanation_terms",
        "decisive_discrepancies",
        "contestable_readings",
        "reference_status",
        "authoring",
    }
)
"""Field names of the answer key and case identity; none may appear as a key in a
candidate-visible payload, and those with an underscore may not appear in any string either.
Generic names (`variant`, `notes`, `author`, `review`) are left out because they are ordinary
words or plausible parameter names; their *values* are covered by `grader_only_values`. A test
checks this set against the models."""


LeakKind = Literal["answer_key_field", "grader_value"]
"""An answer-key field name, or a grader-only value."""


class Leak(BaseModel):
    """One grader-only item found in a candidate-visible payload."""

    model_config = documented(frozen=True)

    pointer: str
    """JSON pointer to the key or string where it was found (empty: the payload itself)."""
    kind: LeakKind
    """Whether an answer-key field name or a grader-only value was found."""
    found: str
    """The forbidden name or value that matched."""

    def __str__(self) -> str:
        return f"{self.pointer or '/'}: {self.kind} {self.found!r}"


def grader_only_values(case: AuthoredCase) -> set[str]:
    """The values of a case a candidate must never see.

    Returns:
        The case id, the variant name, the acceptable reason codes, the decisive condition, the
        authoring notes and any preserved reviewer disagreements (empty strings dropped).
    """
    values = {
        case.case_id,
        case.variant,
        *(code.value for code in case.expectations.acceptable_reason_codes),
        case.expectations.decisive_condition,
        case.authoring.notes,
        *case.reference_status.disagreements,
    }
    return {value for value in values if value.strip()}


_TOKEN_CHARS = "A-Za-z0-9_"


@lru_cache(maxsize=8192)
def _matcher(value: str) -> re.Pattern[str]:
    # Compiled on first need only: a corpus has hundreds of grader-only values, nearly every
    # text is clean, and compiling every pattern up front cost about 0.1 s of each corpus load.
    collapsed = " ".join(value.split())
    if " " in collapsed:
        return re.compile(re.escape(collapsed), re.IGNORECASE)
    return re.compile(
        rf"(?<![{_TOKEN_CHARS}]){re.escape(collapsed)}(?![{_TOKEN_CHARS}])", re.IGNORECASE
    )


@lru_cache(maxsize=64)
def _compiled(forbidden: frozenset[str]) -> tuple[re.Pattern[str] | None, list[str]]:
    """One screening pattern for all values, and the values to check one by one (`_matcher`).

    Most strings are clean: the single alternation rejects them in one pass, and only a string
    it flags is checked value by value (which also reports overlapping values exactly).
    """
    values = [value for value in sorted(forbidden) if value.strip()]
    if not values:
        return None, []
    # The screen runs on lower-cased text and has no look-arounds, so `re` can skip positions by
    # their first character; it may flag a token inside a longer identifier, which the exact
    # per-value patterns then reject.
    literals = sorted({" ".join(value.split()).lower() for value in values}, key=len)
    screen = re.compile("|".join(re.escape(literal) for literal in reversed(literals)))
    return screen, values


def _screened(
    collapsed: str, lowered: str, screen: re.Pattern[str] | None, matchers: list[str]
) -> list[str]:
    """The values of `matchers` found in a text, checked one by one only where `screen` flags it."""
    if screen is None or not screen.search(lowered):
        return []
    return [value for value in matchers if _matcher(value).search(collapsed)]


_FIELD_WORDS = frozenset(name for name in ANSWER_KEY_FIELDS if "_" in name)
_MEMO_CHARS = 4_000_000
"""Characters of text a scanner remembers findings for (a bound: past it the memo starts
again), so at most 16 scanners hold some 64 MB however long a run's texts are."""


class _Scanner:
    """The findings of each text against one forbidden set, each distinct text scanned once.

    The screens cost about 10 µs per string, and a run's payloads repeat the same strings
    across its trials (the same case's tool results for every agent and every trial): a
    workflow demo scanned 1.7 million strings, most of them seen before. Findings depend only on
    the text and the forbidden set, so they are remembered per text.
    """

    def __init__(self, forbidden: frozenset[str]) -> None:
        self._screens: tuple[tuple[LeakKind, re.Pattern[str] | None, list[str]], ...] = (
            ("answer_key_field", *_compiled(_FIELD_WORDS)),
            ("grader_value", *_compiled(forbidden)),
        )
        self._memo: dict[str, tuple[tuple[LeakKind, str], ...]] = {}
        self._memo_chars = 0

    def findings(self, text: str) -> tuple[tuple[LeakKind, str], ...]:
        """(kind, value) of each field name and forbidden value in `text`, in reporting order."""
        found = self._memo.get(text)
        if found is None:
            collapsed = " ".join(text.split())
            lowered = collapsed.lower()
            found = tuple[tuple[LeakKind, str], ...](
                (kind, value)
                for kind, screen, matchers in self._screens
                for value in _screened(collapsed, lowered, screen, matchers)
            )
            if len(text) <= _MEMO_CHARS:
                if self._memo_chars + len(text) > _MEMO_CHARS:
                    self._memo.clear()
                    self._memo_chars = 0
                self._memo[text] = found
                self._memo_chars += len(text)
        return found


@lru_cache(maxsize=16)
def _scanner(forbidden: frozenset[str]) -> _Scanner:
    return _Scanner(forbidden)


def find_leaks(payload: Any, forbidden: Iterable[str]) -> list[Leak]:
    """Find answer-key field names and forbidden values anywhere in a payload.

    Args:
        payload: JSON-like data (dicts, lists, strings, numbers) or a plain string such as a
            file's text or an environment variable's value.
        forbidden: Grader-only values, usually `grader_only_values(case)` (or their union over
            a corpus when scanning anything shared between cases).

    Returns:
        Every leak found, in document order; empty when the payload is clean.
    """
    scanner = _scanner(forbidden if isinstance(forbidden, frozenset) else frozenset(forbidden))
    leaks: list[Leak] = []

    def scan_text(text: str, path: list[str | int]) -> None:
        found = scanner.findings(text)
        if found:
            pointer = json_pointer(path)
            leaks.extend(Leak(pointer=pointer, kind=kind, found=value) for kind, value in found)

    def walk(node: Any, path: list[str | int]) -> None:
        if isinstance(node, dict):
            for key, child in node.items():
                key_text = str(key)
                if key_text.lower() in ANSWER_KEY_FIELDS:
                    leaks.append(
                        Leak(
                            pointer=json_pointer([*path, key_text]),
                            kind="answer_key_field",
                            found=key_text,
                        )
                    )
                else:
                    scan_text(key_text, [*path, key_text])
                walk(child, [*path, key_text])
        elif isinstance(node, list | tuple):
            for index, child in enumerate(node):
                walk(child, [*path, index])
        elif isinstance(node, str):
            scan_text(node, path)

    walk(payload, [])
    return leaks
