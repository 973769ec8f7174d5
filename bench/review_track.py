"""A bench-local reviewer track: exactly the work one RTB reviewer trial does, nothing more.

Each trial builds the shared review prompt + one candidate input of the built-in corpus (the
same messages `trustbench.rtb.review.reviewers.build_review_messages` gives every reviewer),
sends them with one `ctx.chat`, and validates the reply with
`trustbench.rtb.review._validation.validate_response`. So the per-trial cost measured here is
the harness plus the real reviewer-trial work.

Switching the benches to the real track later: pass `--track rtb/review` to a bench (the spec
writer then uses `suite = "rtb"`, `track = "review"` and that track's own options); this module is
only the stand-in while `rtb/review` is not merged.

Track options: `cases` (how many cases of the corpus, in id order; default all).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from trustbench.core import (
    Manifest,
    Resolution,
    ResolvedItem,
    TrialContext,
    TrialKey,
    TrialOutcome,
    cross_product,
    register_track,
)
from trustbench.providers import ChatRequest
from trustbench.rtb import CandidateInput, Corpus, load_corpus, to_candidate_input
from trustbench.rtb.review._validation import validate_response
from trustbench.rtb.review.reviewers import ReferencePolicyReviewer, build_review_messages

TRACK_ID = "bench/review"
TRACK_TARGET = "bench.review_track:BenchReviewTrack"

_CORPUS: Corpus | None = None


def register() -> None:
    """Register this track as `bench/review` (in the process that freezes and runs)."""
    register_track(TRACK_ID, TRACK_TARGET)


def corpus() -> Corpus:
    """The built-in corpus, loaded (and validated) once per process."""
    global _CORPUS
    if _CORPUS is None:
        _CORPUS = load_corpus()
    return _CORPUS


def evaluation_id(trial_id: str) -> str:
    """A per-trial evaluation id that does not reveal the case (as a reviewer trial uses)."""
    return "ev-" + hashlib.sha256(trial_id.encode()).hexdigest()[:16]


def review_messages(case_index: int, trial_id: str) -> tuple[list[dict[str, str]], CandidateInput]:
    """The messages and candidate input of one trial of the case at `case_index`."""
    loaded = corpus()
    candidate_input = to_candidate_input(loaded.cases[case_index], evaluation_id(trial_id))
    return build_review_messages(loaded.review_prompt, candidate_input), candidate_input


class BenchReviewTrack:
    """One chat call per trial with a reviewer's messages; the reply is validated, not graded."""

    def __init__(self) -> None:
        self._index: dict[str, int] | None = None

    def _case_index(self) -> dict[str, int]:
        if self._index is None:
            self._index = {case.case_id: i for i, case in enumerate(corpus().cases)}
        return self._index

    def resolve(self, spec: Any, base_dir: Path) -> Resolution:
        loaded = corpus()
        items = [
            ResolvedItem("corpus", name, path=loaded.root / name) for name in sorted(loaded.files)
        ]
        return Resolution(
            corpus_version=loaded.version, corpus_root=f"builtin:{loaded.version}", items=items
        )

    def plan(self, manifest: Manifest) -> list[TrialKey]:
        count = int(manifest.spec.track_options.get("cases", len(corpus().cases)))
        return cross_product([case.case_id for case in corpus().cases[:count]], manifest)

    async def run_trial(self, key: TrialKey, ctx: TrialContext) -> TrialOutcome:
        messages, candidate_input = review_messages(self._case_index()[key.case_id], key.trial_id)
        reply = await ctx.chat(ChatRequest(messages=messages, temperature=0.0))
        validated = validate_response(reply.text, candidate_input)
        return TrialOutcome(
            "completed",
            {"outcome": validated.outcome.value, "invalid_reason": validated.invalid_reason},
        )


def reference_reply(body: dict[str, Any]) -> str:
    """The reference-policy reviewer's reply to a chat body carrying a review (server side)."""
    candidate_input = CandidateInput.model_validate_json(body["messages"][-1]["content"])
    reply = ReferencePolicyReviewer().review(body["messages"][0]["content"], candidate_input)
    return reply or ""


def reference_responder(settings: dict[str, Any]) -> Any:
    """In-process candidate: the reference-policy reviewer answering the chat request."""

    def respond(request: ChatRequest) -> str:
        return reference_reply({"messages": request.messages})

    return respond


def reply_cache_key(content: str) -> tuple[str, str]:
    """`(evaluation_id, content without it)`: replies differ per trial only by the id."""
    eid = json.loads(content)["evaluation_id"]
    return eid, content.replace(eid, "")
