"""Server-rendered pages of the review app (jinja2 templates shipped as package data).

Pages are built only from candidate-visible data: the `CandidateInput` (what a model reviewer
receives), the shared review prompt, the reason-code vocabulary and, when the protocol shows it,
the paired AI configuration's decision. No case id, variant, answer key, other participant's
answer or grader file is ever passed to a template.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from trustbench._local_app import format_limit, page_renderer
from trustbench.rtb.corpus._models import CandidateInput, Decision

TITLE = "trustbench review session"
"""Title of every page (it names no case, participant or team)."""


render = page_renderer("trustbench.rtb.human", TITLE)
"""Render one template with the common values (title, progress)."""


def _record_fields(record: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(k.replace("_", " "), v) for k, v in record.items() if k not in ("kind", "record_id")]


def recommendation_text(configuration: str, outcome: str | None) -> str:
    """What the participant reads about the paired AI configuration's decision on this case."""
    if outcome in ("permit", "deny", "hold"):
        return f"The AI review configuration {configuration} decided: {outcome.upper()}."
    if outcome is None:
        return f"The AI review configuration {configuration} has no result for this case."
    return (
        f"The AI review configuration {configuration} gave no valid recommendation for this "
        f"case (its reply was {outcome})."
    )


def review_page(
    *,
    base: str,
    candidate_input: CandidateInput,
    prompt: str,
    position: int,
    total: int,
    time_limit_s: float,
    recommendation: str | None,
    reason_meaning: Mapping[str, str],
    discrepancy_format: str | None = None,
    error: str | None = None,
    form: dict[str, Any] | None = None,
) -> str:
    """The review page of one case: input, optional recommendation, the finding form.

    `reason_meaning` is the corpus policy's reason-code vocabulary (`CorpusPolicy.reason_meaning`):
    a participant chooses from the codes the grader reads for this corpus, as a model does.
    `discrepancy_format` (None: the policy reads none) shows the structured-discrepancy field.
    """
    document = candidate_input.model_dump(mode="json")
    records = [
        {
            "record_id": r["record_id"],
            "kind": r["kind"].replace("_", " "),
            "fields": _record_fields(r),
        }
        for r in document["evidence"]
    ]
    return render(
        "review.html.j2",
        base=base,
        input=candidate_input,
        input_json=json.dumps(document, indent=2, ensure_ascii=False),
        records=records,
        prompt=prompt,
        progress=f"case {position + 1} of {total}",
        time_limit=format_limit(time_limit_s),
        recommendation=recommendation,
        decisions=[d.value for d in Decision],
        reason_codes=list(reason_meaning.items()),
        discrepancy_format=discrepancy_format,
        error=error,
        form=form
        or {
            "decision": None,
            "reason_codes": [],
            "evidence_refs": [],
            "explanation": "",
            "discrepancies": "",
        },
    )
