"""Message building and reply unwrapping for chat-model reviewers (no network here).

The provider clients (`trustbench.providers`) send the messages and return the reply text; this
module only decides *what* a model sees and *how much* of its reply formatting is tolerated. Both
choices are part of the review protocol and must be identical for every model under comparison.
"""

from __future__ import annotations

import re

from trustbench.rtb.corpus._models import CandidateInput

_FENCE = re.compile(r"\A```(?:json)?[ \t]*\r?\n(?P<body>.*?)\r?\n?```\Z", re.DOTALL | re.IGNORECASE)


def build_review_messages(prompt: str, candidate_input: CandidateInput) -> list[dict[str, str]]:
    """Build the chat messages for one review.

    The system message is the shared review prompt verbatim and the user message is the candidate
    input serialised as JSON, so every reviewer receives the same evidence packet and nothing else
    (no case id, no variant, no answer key: `CandidateInput` cannot hold them).

    Args:
        prompt: The shared advisory-review prompt text from the corpus.
        candidate_input: The exported, candidate-visible input for one case.

    Returns:
        `[{"role": "system", ...}, {"role": "user", ...}]`.
    """
    return [
        {"role": "system", "content": prompt},
        {"role": "user", "content": candidate_input.model_dump_json(indent=2)},
    ]


def extract_json_object(text: str) -> str | None:
    """Return the JSON-object text of a reply, tolerating exactly one Markdown code fence.

    Chat models often wrap JSON in a ```` ```json ```` fence; that wrapper is tolerated so the
    comparison measures findings rather than formatting habits. Nothing else is: prose around
    the object, several objects or a fence with trailing text make the reply not-an-object, so a
    reviewer is never credited with a finding the harness had to dig out of free text.

    Args:
        text: The raw reply.

    Returns:
        The text to parse as JSON (it starts with `{` and ends with `}`), or None when the reply is
        not a single JSON object in one of the two tolerated forms. This function does not parse
        the JSON; `validate_response` does, and reports why a reply is invalid.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced is not None:
        body = fenced.group("body").strip()
    if body.startswith("{") and body.endswith("}"):
        return body
    return None
