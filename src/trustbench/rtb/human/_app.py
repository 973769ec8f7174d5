"""The aiohttp review app: one participant, one case at a time, over 127.0.0.1 by default.

Routes (every session route is under `/s/<token>`, where the token is the participant's
per-session access token; an unknown token gets 403 and no page content):

- `GET /s/<token>`: the open case (issued on first view), the paused page or the finished page;
- `POST /s/<token>/submit`: the finding form, validated with `validate_response`;
- `POST /s/<token>/pause` and `/resume`: stop and restart the case clock.

Nothing else is served: no static files, no run-folder files, no API. Responses carry a strict
Content-Security-Policy (no external or scripted content), `no-store` and `same-origin` referrer
policy (the token is in the URL: it never leaves for another origin; `no-referrer` would make
browsers send `Origin: null` on the app's own form posts).

Every POST must come from a page of this app: its `Origin` (or, lacking one, its `Referer`) must
name the host the request was sent to, or the browser must mark it `Sec-Fetch-Site: same-origin`,
else 403, so another site open in the participant's
browser cannot submit or pause for them. Every request's `Host` must name the address the app
serves (its own socket's address; `localhost` too on a loopback one), else 403: a DNS-rebinding
page, whose `Origin` and `Host` both name the attacker's domain, is refused. A form that cannot
be parsed (malformed multipart, a file where text belongs) is answered 400, never 500.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import BaseModel

import trustbench
from trustbench._local_app import (
    ServedFolder,
    back_to_session,
    check_origin,
    format_limit,
    html,
    new_app,
    page_renderer,
    posted_form,
    session_owner,
)
from trustbench.core import Ledger, check_inputs, load_track, read_ledger, read_manifest
from trustbench.errors import CheckFailed, InputError
from trustbench.rtb.corpus._models import CandidateInput, Decision
from trustbench.rtb.human._store import FORMAT as DISCREPANCY_FORMAT
from trustbench.rtb.human._store import SessionStore, participant_plans
from trustbench.rtb.policy import policy_for
from trustbench.rtb.review.track import ReviewTrack

# ------------------------------------------------------------------------------------------------
# Server-rendered pages of the review app (jinja2 templates shipped as package data).
#
# Pages are built only from candidate-visible data: the `CandidateInput` (what a model reviewer
# receives), the shared review prompt, the reason-code vocabulary and, when the protocol shows it,
# the paired AI configuration's decision. No case id, variant, answer key, other participant's
# answer or grader file is ever passed to a template.

TITLE = "trustbench review session"
"""Title of every page (it names no case, participant or team)."""


render = page_renderer("trustbench.rtb.human", TITLE)
"""Render one template with the common values (title, progress)."""


def _record_fields(record: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(k.replace("_", " "), v) for k, v in record.items() if k not in ("kind", "record_id")]


def case_view(candidate_input: BaseModel) -> dict[str, Any]:
    """The template values of a case as a candidate receives it (`case_input.html.j2`).

    Shared by this app and `rtb adjudicate serve`, so a domain reviewer reads a case exactly
    as a participant (and a model) does: the `as_of` instant where the policy has one, every
    proposal field, each evidence record, and the exact JSON. Built from the candidate input
    alone, it cannot show the answer key.
    """
    document = candidate_input.model_dump(mode="json")
    proposal = document["proposal"]
    return {
        "input": candidate_input,
        "input_json": json.dumps(document, indent=2, ensure_ascii=False),
        "as_of": document.get("as_of"),
        "proposal_fields": [
            (name.replace("_", " "), value)
            for name, value in proposal.items()
            if name != "parameters"
        ],
        "parameters": list(proposal.get("parameters", {}).items()),
        "records": [
            {
                "record_id": r["record_id"],
                "kind": r["kind"].replace("_", " "),
                "fields": _record_fields(r),
            }
            for r in document["evidence"]
        ],
    }


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
    candidate_input: CandidateInput | BaseModel,
    prompt: str,
    position: int,
    total: int,
    time_limit_s: float,
    recommendation: str | None,
    reason_meaning: Mapping[str, str],
    discrepancy_format: str | None = None,
    error: str | None = None,
    form: dict[str, Any] | None = None,
    live_desk: bool = False,
) -> str:
    """The review page of one case: input, optional recommendation, the finding form.

    `reason_meaning` is the corpus policy's reason-code vocabulary (`CorpusPolicy.reason_meaning`):
    a participant chooses from the codes the grader reads for this corpus, as a model does.
    `discrepancy_format` (None: the policy reads none) shows the structured-discrepancy field.
    `live_desk`: a live proposal of a workflow loop (`rtb.human._desk`): its time limit is
    enforced from its arrival and there is no pause.
    """
    return render(
        "review.html.j2",
        **case_view(candidate_input),
        base=base,
        prompt=prompt,
        progress=f"case {position + 1} of {total}",
        time_limit=format_limit(time_limit_s),
        recommendation=recommendation,
        decisions=[d.value for d in Decision],
        reason_codes=list(reason_meaning.items()),
        discrepancy_format=discrepancy_format,
        error=error,
        live_desk=live_desk,
        form=form
        or {
            "decision": None,
            "reason_codes": [],
            "evidence_refs": [],
            "explanation": "",
            "discrepancies": "",
        },
    )


STORE_KEY: web.AppKey[SessionStore] = web.AppKey("store", SessionStore)
"""Where the app keeps its session store."""
PROMPT_KEY: web.AppKey[str] = web.AppKey("prompt", str)
"""Where the app keeps the shared review prompt."""
REASONS_KEY: web.AppKey[dict[str, str]] = web.AppKey("reason_meaning", dict)
"""The corpus policy's reason codes -> meanings: the finding form's choices."""


def _candidate(request: web.Request) -> str:
    """The candidate whose token is in the URL (constant-time comparison), or 403."""
    return session_owner(
        request,
        lambda: render(
            "landing.html.j2",
            heading="Unknown session link",
            message="This link does not open a review session. Use the link you were given.",
        ),
    )


async def finding_form(request: web.Request) -> dict[str, Any]:
    """The submitted finding form as text fields; 400 when it cannot be parsed."""
    data = await posted_form(request)
    return {
        "evaluation_id": str(data.get("evaluation_id", "")),
        "decision": data.get("decision"),
        "reason_codes": [str(v) for v in data.getall("reason_codes", [])],
        "evidence_refs": [str(v) for v in data.getall("evidence_refs", [])],
        "explanation": str(data.get("explanation", "")),
        "discrepancies": str(data.get("discrepancies", "")),
    }


def _page(
    request: web.Request, candidate: str, *, error: str | None = None, form: Any = None
) -> web.Response:
    store = request.app[STORE_KEY]
    session = store.sessions[candidate]
    base = f"/s/{request.match_info['token']}"
    if session.paused:
        return html(render("paused.html.j2", base=base))
    opened = store.open_case(candidate)
    if opened is None:
        return html(render("finished.html.j2", total=len(session.plan.order)))
    clock, candidate_input = opened
    plan = session.plan
    recommendation = None
    if plan.shows_recommendation:
        recommendation = recommendation_text(
            store.recommendation_labels[candidate], plan.recommendations.get(clock.case_id)
        )
    return html(
        review_page(
            base=base,
            candidate_input=candidate_input,
            prompt=request.app[PROMPT_KEY],
            position=session.position,
            total=len(plan.order),
            time_limit_s=plan.participant.time_limit_s,
            recommendation=recommendation,
            reason_meaning=request.app[REASONS_KEY],
            discrepancy_format=DISCREPANCY_FORMAT if store.structured_discrepancies else None,
            error=error,
            form=form,
        )
    )


async def _landing(request: web.Request) -> web.Response:
    return html(
        render(
            "landing.html.j2",
            heading="Review sessions",
            message="Open the personal session link you were given.",
        )
    )


async def _show(request: web.Request) -> web.Response:
    return _page(request, _candidate(request))


async def _submit(request: web.Request) -> web.Response:
    candidate = _candidate(request)
    check_origin(request)
    form = await finding_form(request)
    result = request.app[STORE_KEY].submit(candidate, form)
    if result.recorded:
        raise back_to_session(request)
    return _page(request, candidate, error=result.reason, form=form)


async def _pause(request: web.Request) -> web.Response:
    candidate = _candidate(request)
    check_origin(request)
    request.app[STORE_KEY].pause(candidate)
    raise back_to_session(request)


async def _resume(request: web.Request) -> web.Response:
    candidate = _candidate(request)
    check_origin(request)
    request.app[STORE_KEY].resume(candidate)
    raise back_to_session(request)


def build_app(
    store: SessionStore, tokens: dict[str, str], prompt: str, reason_meaning: Mapping[str, str]
) -> web.Application:
    """The review app over a session store.

    Args:
        store: Sessions persisted through the run's ledger.
        tokens: Access token -> human candidate name (one per participant).
        prompt: The shared review prompt (shown as the participant's instructions).
        reason_meaning: The corpus policy's reason codes and their meanings (the form's
            choices: the vocabulary the grader reads for this corpus).
    """
    app = new_app(tokens, _landing, _show)
    app[STORE_KEY] = store
    app[PROMPT_KEY] = prompt
    app[REASONS_KEY] = dict(reason_meaning)
    app.router.add_post("/s/{token}/submit", _submit)
    app.router.add_post("/s/{token}/pause", _pause)
    app.router.add_post("/s/{token}/resume", _resume)
    return app


# ------------------------------------------------------------------------------------------------
# Open a frozen human run for serving: lock, checks, ledger, sessions and access tokens.
#
# `open_session_run` takes the run folder's lock (the same lock `trustbench run` takes, so the two
# can never write one ledger at once), re-checks every frozen input exactly as `run` does, opens
# the ledger (refusing a broken chain), loads the participants' plans and rebuilds their sessions.
# Closing it pauses every open case clock, appends `run_finished` and releases the lock.


@dataclass
class SessionRun(ServedFolder):
    """A run folder open for serving (use as a context manager)."""

    run_dir: Path
    """The run folder."""
    store: SessionStore | None = None
    """The sessions (set while open)."""
    clock: Callable[[], float] = field(default=time.time)
    """Epoch seconds now, for the case clocks and enforced time limits (a test fakes it)."""

    @property
    def served_folder(self) -> Path:
        """The run folder."""
        return self.run_dir

    def _open(self) -> None:
        manifest = read_manifest(self.run_dir)
        track, _ = load_track(manifest.spec.track_id)
        if not isinstance(track, ReviewTrack):
            raise InputError(
                f"a {manifest.spec.track_id} run has no human sessions", location=str(self.run_dir)
            )
        keys = check_inputs(manifest, track)
        corpus = track.corpus(manifest.corpus.root)
        plans = participant_plans(manifest, corpus)
        self._ledger = Ledger.open(self.run_dir, manifest.manifest_sha256)
        contents = read_ledger(self.run_dir)
        planned = {key.trial_id for key in keys}
        if not {t["trial_id"] for t in contents.trials} <= planned:
            raise CheckFailed("the ledger holds trials outside the frozen plan", location="ledger")
        labels = {
            plan.candidate: plan.participant.recommendation.configuration
            for plan in plans
            if plan.participant.recommendation is not None
        }
        self.store = SessionStore(self._ledger, corpus, plans, contents, labels, self.clock)
        self.tokens = {secrets.token_urlsafe(24): plan.candidate for plan in plans}
        finished = self.store.finished_count()
        self._ledger.event(
            "run_started",
            {
                "pid": os.getpid(),
                "trustbench_version": trustbench.__version__,
                "planned": len(keys),
                "finished_before": finished,
                "remaining": len(keys) - finished,
                "served_by": "trustbench rtb human serve",
            },
        )
        self._ledger.anchor(force=True)
        reasons = policy_for(corpus.policy_id).reason_meaning
        self.app = build_app(self.store, self.tokens, corpus.review_prompt, reasons)

    def _close(self, ledger: Ledger) -> None:
        if self.store is not None:
            for candidate in self.store.sessions:
                self.store.pause(candidate)  # a case past its enforced limit is held instead
            ledger.event(
                "run_finished",
                {
                    "finished": self.store.finished_count(),
                    "head": ledger.head,
                    "served_by": "human review app",
                },
            )
            ledger.anchor(force=True)


def open_session_run(run_dir: Path) -> SessionRun:
    """A `SessionRun` for `run_dir` (enter it to open; exit to pause clocks and close)."""
    return SessionRun(run_dir=Path(run_dir))
