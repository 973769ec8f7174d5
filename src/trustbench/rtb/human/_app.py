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

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from trustbench._local_app import (
    back_to_session,
    check_origin,
    html,
    new_app,
    posted_form,
    session_owner,
)
from trustbench.rtb.human._discrepancies import FORMAT as DISCREPANCY_FORMAT
from trustbench.rtb.human._pages import recommendation_text, render, review_page
from trustbench.rtb.human._store import SessionStore

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


async def _form(request: web.Request) -> dict[str, Any]:
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
    form = await _form(request)
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
