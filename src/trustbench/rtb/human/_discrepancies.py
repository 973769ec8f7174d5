"""The finding form's structured discrepancies, one per line, for policies whose grader reads them.

A corpus policy may support a finding by structured discrepancies (`Discrepancy`: record, JSON
pointer, proposed and evidence values; `CorpusPolicy.structured_discrepancies`), and its
response schema then requires the list.
A participant writes them as lines `RECORD_ID | /json/pointer | proposed value | evidence value`;
a value is read as JSON when it parses (`14`, `"14"`, `["a", "b"]`, `null`) and as text
otherwise, and an empty value is null. The list built from the lines goes into the reply as a
model's would, so `validate_response` checks it exactly as it checks a model's.
"""

from __future__ import annotations

import json
from typing import Any

FORMAT = "RECORD_ID | /json/pointer | proposed value | evidence value"
"""How one discrepancy line is written (shown beside the form field)."""


class DiscrepancyLineError(ValueError):
    """A discrepancy line that is not four `|`-separated parts (names the line)."""


def _value(text: str) -> Any:
    text = text.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_discrepancies(text: str) -> list[dict[str, Any]]:
    """The discrepancies a participant wrote, one per non-blank line.

    Raises:
        DiscrepancyLineError: a line without exactly four parts (its number and the format).
    """
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != 4:
            raise DiscrepancyLineError(
                f"discrepancy line {number} has {len(parts)} part(s); write {FORMAT}"
            )
        record_id, pointer, proposed, evidence = parts
        found.append(
            {
                "record_id": record_id.strip(),
                "field": pointer.strip(),
                "proposed_value": _value(proposed),
                "evidence_value": _value(evidence),
            }
        )
    return found


def discrepancy_lines(discrepancies: list[dict[str, Any]]) -> str:
    """The lines that `parse_discrepancies` reads back as `discrepancies` (values as JSON)."""
    return "\n".join(
        " | ".join(
            [
                str(d["record_id"]),
                str(d["field"]),
                json.dumps(d.get("proposed_value")),
                json.dumps(d.get("evidence_value")),
            ]
        )
        for d in discrepancies
    )
