"""The live review desk: a person as a member of a workflow loop's review chain.

When a workflow configuration's review chain names a `human` member, `trustbench run` serves this
desk while the run lasts, on the review app's own stack (`trustbench._local_app`: 127.0.0.1, one
access token per person printed to the operator, the Host and Origin guards, the review page
template of `rtb human serve`). Each live proposal put to the person appears on their page as it
arrives, built from the very review request a model member gets: the chat messages the loop
builds (`live_review_messages`: the corpus's review prompt, and the policy's candidate input with
the live proposal and the evidence the loop read). Nothing else reaches the page: no label, no
reason code of the policy's decision, no scenario id, no other reviewer's answer.

The person's form becomes a reviewer reply (`finding_reply`) and is checked with the reviewer
track's `validate_response` before it is accepted; a refused form is shown again with the reason
(with a declared `max_submissions`, the last refused one holds the proposal,
`review_budget_exhausted`). The declared time limit is enforced per proposal, counted from its
arrival at the desk (waiting behind another proposal counts): with no accepted finding by then
the proposal is the reviewer's hold, error class `time_limit_exceeded`, never an approval.

The desk answers as a chat provider (`DeskReviewer`), so the loop asks a person exactly as it asks
a model (`context_asker`) and core records the call as an attempt of the trial: the request body
holds the messages the page was built from, the reply the finding as JSON, or the error class.

The server runs on the run's event loop, so a proposal waiting for a person holds only its own
trial; it stops with the loop at the end of `trustbench run`.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from pydantic import BaseModel

from trustbench._local_app import (
    announce_links,
    app_runner,
    back_to_session,
    check_origin,
    html,
    listen_socket,
    new_app,
    session_owner,
)
from trustbench.providers import AttemptResult, ChatReply, ChatRequest
from trustbench.rtb.human._app import finding_form, render, review_page
from trustbench.rtb.human._store import BUDGET, FORMAT, DiscrepancyLineError, finding_reply
from trustbench.rtb.policy import policy_for
from trustbench.rtb.review._options import ReviewerAccess
from trustbench.rtb.review._validation import validate_response

DESK_ENDPOINT = "trustbench-rtb-review-desk"
"""`attempts.endpoint` of a person's answers in the loop (no network endpoint is involved)."""
TIME_LIMIT_EXCEEDED = "time_limit_exceeded"
"""Error class of a proposal no finding was accepted for within the declared limit."""


class ReviewBudgetSpent(Exception):
    """The last submission the declared budget allows was refused: the proposal is held."""


@dataclass
class LiveProposal:
    """One proposal waiting at the desk for one person."""

    reviewer: str
    """The chain member (person) it waits for."""
    prompt: str
    """The review prompt, exactly as a model member receives it (system message)."""
    candidate_input: BaseModel
    """The live proposal and its evidence, exactly as a model member receives them."""
    limits: ReviewerAccess
    """The person's declared limits (time limit per proposal, submission budget)."""
    answer: asyncio.Future[str]
    """Set to the accepted finding (reply JSON), or to `ReviewBudgetSpent`."""
    rejected: int = 0
    """Submissions refused by validation so far."""

    @property
    def evaluation_id(self) -> str:
        """The id the finding must echo (as a model's reply must)."""
        return str(getattr(self.candidate_input, "evaluation_id", ""))


@dataclass
class ReviewDesk:
    """The people of a run's review chains, each with their queue of live proposals.

    Args:
        policy_id: The corpus policy (its candidate model, reason codes, reply rules).
        people: Each human member's declared limits, by member name.
    """

    policy_id: str
    people: Mapping[str, ReviewerAccess]
    tokens: dict[str, str] = field(default_factory=dict)
    """Access token -> person (fresh for every run; give each only to its owner)."""
    app: web.Application | None = None
    """The app (set once serving)."""
    waiting: dict[str, list[LiveProposal]] = field(default_factory=dict)
    """Open proposals per person, oldest first."""
    answered: dict[str, int] = field(default_factory=dict)
    """Findings accepted per person."""
    _ready: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)
    _serving: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.waiting = {name: [] for name in self.people}
        self.answered = dict.fromkeys(self.people, 0)

    def open(self, host: str = "127.0.0.1") -> None:
        """Bind a free port on `host`, serve on the running loop, print each person's link.

        Raises:
            InputError: The address cannot be bound.
        """
        listening = listen_socket(host, 0)
        self.tokens = {secrets.token_urlsafe(24): name for name in self.people}
        self.app = desk_app(self)
        self._serving = asyncio.get_running_loop().create_task(self._serve(listening))
        base_url = f"http://{host}:{listening.getsockname()[1]}"
        announce_links(self, "the live review desk", base_url, "while the run lasts")

    def links(self, base_url: str) -> dict[str, str]:
        """Person -> personal desk URL (`/s/<token>`)."""
        return {who: f"{base_url}/s/{token}" for token, who in self.tokens.items()}

    async def _serve(self, listening: socket.socket) -> None:
        """Serve until the run's loop cancels the task (the end of the run)."""
        assert self.app is not None
        runner = app_runner(self.app)
        await runner.setup()
        try:
            await web.SockSite(runner, listening).start()
            self._ready.set()
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()
            listening.close()

    def provider(self, name: str) -> DeskReviewer:
        """The chat provider through which the loop asks person `name`."""
        return DeskReviewer(self, name)

    def providers(self) -> dict[str, DeskReviewer]:
        """Every person's provider, by member name (`context_asker`'s `desk`)."""
        return {name: self.provider(name) for name in self.people}

    async def ask(self, name: str, request: ChatRequest) -> AttemptResult:
        """Show one review request to `name` and wait for their finding, within the limit."""
        limits = self.people[name]
        limit = float(limits.time_limit_s or 0.0)  # a declared limit is checked at freeze
        system, user = request.messages[0], request.messages[-1]
        proposal = LiveProposal(
            reviewer=name,
            prompt=str(system["content"]),
            candidate_input=policy_for(self.policy_id).candidate_model.model_validate_json(
                str(user["content"])
            ),
            limits=limits,
            answer=asyncio.get_running_loop().create_future(),
        )
        body = {
            "reviewer": name,
            "shown_on": DESK_ENDPOINT,
            "time_limit_s": limit,
            "messages": request.messages,
        }
        started = time.perf_counter()
        self.waiting[name].append(proposal)
        try:
            raw = await asyncio.wait_for(self._finding(proposal), limit)
        except TimeoutError:
            detail = f"time_limit: no finding within the declared {limit:g} s of its arrival"
            return _attempt(body, started, error=(TIME_LIMIT_EXCEEDED, detail))
        except ReviewBudgetSpent as spent:
            return _attempt(body, started, error=(BUDGET, str(spent)))
        finally:
            self.waiting[name].remove(proposal)
        self.answered[name] += 1
        return _attempt(body, started, raw=raw)

    async def _finding(self, proposal: LiveProposal) -> str:
        await self._ready.wait()
        return await proposal.answer

    def next_for(self, name: str) -> LiveProposal | None:
        """The oldest proposal still open for `name`."""
        return next((p for p in self.waiting[name] if not p.answer.done()), None)

    def open_proposal(self, name: str, evaluation_id: str) -> LiveProposal | None:
        """The open proposal of `name` that a posted form names, if it is still open."""
        return next(
            (
                p
                for p in self.waiting[name]
                if not p.answer.done() and p.evaluation_id == evaluation_id
            ),
            None,
        )

    def submit(self, proposal: LiveProposal, form: dict[str, Any]) -> str | None:
        """Accept a finding that passes the reviewer track's validation; else say why not."""
        policy = policy_for(self.policy_id)
        try:
            raw = finding_reply(form, structured_discrepancies=policy.structured_discrepancies)
        except DiscrepancyLineError as error:
            reason = str(error)
        else:
            shown: Any = proposal.candidate_input  # the policy's own candidate model
            validated = validate_response(raw, shown)
            if validated.outcome.is_decision:
                proposal.answer.set_result(raw)
                return None
            reason = validated.invalid_reason or validated.outcome.value
        proposal.rejected += 1
        budget = proposal.limits.max_submissions
        if budget is not None and proposal.rejected >= budget:
            detail = f"submissions: {budget} refused, the declared budget; last: {reason}"
            proposal.answer.set_exception(ReviewBudgetSpent(detail))
            return f"{reason}; the review budget is spent: the proposal was held"
        return reason


@dataclass
class DeskReviewer:
    """A person at the desk as a chat provider: one `send` is one proposal shown and answered.

    The per-call `timeout_s` does not apply: the person's declared time limit does.
    """

    desk: ReviewDesk
    name: str
    requested_model: str | None = None
    endpoint: str | None = DESK_ENDPOINT

    def for_trial(self) -> DeskReviewer:
        """The desk keeps no per-trial state."""
        return self

    async def send(self, request: ChatRequest, timeout_s: float) -> AttemptResult:
        """Show the review request and wait for the finding (or the declared limit)."""
        return await self.desk.ask(self.name, request)


def _attempt(
    body: dict[str, Any],
    started: float,
    *,
    raw: str | None = None,
    error: tuple[str, str] | None = None,
) -> AttemptResult:
    """The ledger attempt of one proposal at the desk: what was shown, what came back."""
    error_class, detail = error if error is not None else (None, None)
    return AttemptResult(
        request_body=body,
        requested_model=None,
        request_json=None,
        endpoint=DESK_ENDPOINT,
        raw_response=raw,
        error_class=error_class,
        error_message=detail,
        latency_s=time.perf_counter() - started,
        reply=None if raw is None else ChatReply(text=raw, finish_reason="stop"),
    )


# ------------------------------------------------------------------------------------------------
# The desk's pages: the review app's template and guards, one person's open proposals.

DESK_KEY: web.AppKey[ReviewDesk] = web.AppKey("desk", ReviewDesk)
"""Where the app keeps its desk."""


def desk_app(desk: ReviewDesk) -> web.Application:
    """The guarded app of the desk: `GET /s/<token>` and `POST /s/<token>/submit`."""
    app = new_app(desk.tokens, _landing, _show)
    app[DESK_KEY] = desk
    app.router.add_post("/s/{token}/submit", _submit)
    return app


def _person(request: web.Request) -> str:
    """The person whose token is in the URL (constant-time comparison), or 403."""
    return session_owner(
        request,
        lambda: render(
            "landing.html.j2",
            heading="Unknown desk link",
            message="This link does not open a review desk. Use the link you were given.",
        ),
    )


async def _landing(request: web.Request) -> web.Response:
    return html(
        render(
            "landing.html.j2",
            heading="Review desk",
            message="Open the personal desk link you were given.",
        )
    )


async def _show(request: web.Request) -> web.Response:
    return _desk_page(request, _person(request))


def _desk_page(
    request: web.Request,
    person: str,
    *,
    shown: LiveProposal | None = None,
    error: str | None = None,
    form: dict[str, Any] | None = None,
) -> web.Response:
    """The person's open proposal (the given one, else the oldest), or the waiting page."""
    desk = request.app[DESK_KEY]
    proposal = shown or desk.next_for(person)
    if proposal is None:
        heading = "Your finding was not recorded" if error else "No proposal is waiting"
        message = error or "Nothing waits for your review now. Reload this page for the next one."
        return html(render("landing.html.j2", heading=heading, message=message))
    policy = policy_for(desk.policy_id)
    return html(
        review_page(
            base=f"/s/{request.match_info['token']}",
            candidate_input=proposal.candidate_input,
            prompt=proposal.prompt,
            position=desk.answered[person],
            total=desk.answered[person] + len(desk.waiting[person]),
            time_limit_s=float(proposal.limits.time_limit_s or 0.0),
            recommendation=None,
            reason_meaning=policy.reason_meaning,
            discrepancy_format=FORMAT if policy.structured_discrepancies else None,
            error=error,
            form=form,
            live_desk=True,
        )
    )


async def _submit(request: web.Request) -> web.Response:
    person = _person(request)
    check_origin(request)
    form = await finding_form(request)
    desk = request.app[DESK_KEY]
    proposal = desk.open_proposal(person, str(form["evaluation_id"]))
    if proposal is None:
        closed = "this form belongs to a proposal that is no longer open (answered, or held "
        return _desk_page(request, person, error=closed + "when its time limit passed)")
    reason = desk.submit(proposal, form)
    if reason is None:
        raise back_to_session(request)
    still_open = None if proposal.answer.done() else proposal
    return _desk_page(request, person, shown=still_open, error=reason, form=form)
