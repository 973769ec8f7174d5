"""The reviewer extension point: prompt + candidate input in, raw reply out."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from trustbench.rtb.corpus._models import CandidateInput


@runtime_checkable
class Reviewer(Protocol):
    """A reviewer candidate for the RTB reviewer track.

    A reviewer receives exactly what the review protocol gives every candidate: the shared review
    prompt and one `CandidateInput`. It never receives a `Case` (which carries the answer key), so
    nothing a reviewer returns can have been read off the grader's labels. It returns its raw reply
    unjudged; `validate_response` decides whether the reply is a finding at all.
    """

    name: str
    """Registry name, recorded with every trial (e.g. `reference-policy`, `always-permit`)."""

    def review(self, prompt: str, candidate_input: CandidateInput) -> str | None:
        """Review one input.

        Args:
            prompt: The shared advisory-review prompt text.
            candidate_input: The candidate-visible input for one case.

        Returns:
            The raw reply text, or None when the reviewer produced no output.
        """
        ...
