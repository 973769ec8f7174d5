"""Message building and reply unwrapping for chat-model reviewers (no network here).

The provider clients (`trustbench.providers`) send the messages and return the reply text; this
module only decides *what* a model sees and *how much* of its reply formatting is tolerated. Both
choices are part of the review protocol and must be identical for every model under comparison.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from trustbench.rtb.corpus._models import CandidateInput

if TYPE_CHECKING:
    from trustbench.rtb.policy._protocol import AuthoredCase

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


_EVALUATION_ID = re.compile(r"rtb-[0-9a-f]{32}")
"""What `new_evaluation_id` issues: JSON writes it as it is, with no escaping."""
_MARKER = "rtb-" + "5a" * 16
"""The id a case's input is serialised with once; each trial's id replaces it."""


class ReviewMessages:
    """`build_review_messages` for the cases of one corpus, each case's input serialised once.

    A trial's user message is its candidate input as JSON, and the inputs of one case differ
    only in their fresh evaluation id. Serialising the whole input for every trial was the
    largest cost of the track's own trial work (about 7% of the event loop's time in the
    latency-bound bench), so each case's input is serialised once with a marker id, and a
    trial's message is that text with the marker replaced by its id: the same text as
    `build_review_messages` (tested on every built-in case). A case whose text holds the marker
    elsewhere, or an id of another shape, is serialised in full instead.

    Args:
        prompt: The shared advisory-review prompt text from the corpus.
    """

    def __init__(self, prompt: str) -> None:
        self.prompt = prompt
        self._templates: dict[str, str | None] = {}

    def messages(self, case: AuthoredCase, evaluation_id: str) -> list[dict[str, str]]:
        """The messages of one review of `case` under `evaluation_id`."""
        if case.case_id not in self._templates:
            # The input export is imported by the first review, not with the track: a run with
            # no trial left (a resume of a finished folder) never builds a message.
            from trustbench.rtb.corpus._export import to_candidate_input

            text = to_candidate_input(case, _MARKER).model_dump_json(indent=2)
            self._templates[case.case_id] = text if text.count(_MARKER) == 1 else None
        template = self._templates[case.case_id]
        if template is None or not _EVALUATION_ID.fullmatch(evaluation_id):
            from trustbench.rtb.corpus._export import to_candidate_input

            return build_review_messages(self.prompt, to_candidate_input(case, evaluation_id))
        return [
            {"role": "system", "content": self.prompt},
            {"role": "user", "content": template.replace(_MARKER, evaluation_id)},
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
