"""Why replies were invalid: the top reasons per candidate, with counts and one example each.

A real model that writes a polite line before its JSON can make a candidate "not evaluable"
while the CLI said nothing about why. Reasons name values (a record id, a JSON error's
column), so they are grouped by their shape: quoted values and numbers are replaced by
placeholders, and the first full reason of each group is kept as its example. The record
holds every group (`review.invalid_reasons`); the report and `trustbench report` show the
top `TOP_REASONS` per candidate.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

TOP_REASONS = 3
"""Groups shown per candidate in the report and on the console."""
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"\d+")
_EXAMPLE_CHARS = 200


def reason_shape(reason: str) -> str:
    """A reason with its values blanked, so equal failures group together."""
    return _NUMBER.sub("N", _QUOTED.sub("'…'", reason))


def invalid_reasons(trials: Iterable[Any]) -> dict[str, list[dict[str, Any]]]:
    """Candidate -> reason groups (most frequent first): shape, count, example, reply excerpt.

    Args:
        trials: Graded member trials (`_grading.MemberTrial`): `candidate`, `validated`,
            `raw_reply`.
    """
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    for trial in trials:
        reason = trial.validated.invalid_reason
        if trial.validated.outcome.value != "invalid" or not reason:
            continue
        shape = reason_shape(reason)
        group = groups.setdefault(trial.candidate, {}).setdefault(
            shape,
            {"reason": shape, "count": 0, "example": reason,
             "reply_excerpt": (trial.raw_reply or "")[:_EXAMPLE_CHARS]},
        )  # fmt: skip
        group["count"] += 1
    return {
        name: sorted(by_shape.values(), key=lambda g: (-g["count"], g["reason"]))
        for name, by_shape in sorted(groups.items())
    }


def reason_lines(groups: dict[str, list[dict[str, Any]]], top: int = TOP_REASONS) -> list[str]:
    """One line per shown group: `candidate: N invalid: reason (e.g. example)`."""
    lines = []
    for name, found in groups.items():
        total = sum(g["count"] for g in found)
        for group in found[:top]:
            lines.append(
                f"{name}: {group['count']} of {total} invalid replies: {group['reason']} "
                f"(e.g. {group['example']!r})"
            )
        if len(found) > top:
            rest = sum(g["count"] for g in found[top:])
            lines.append(f"{name}: {rest} more in {len(found) - top} other reason group(s)")
    return lines
