"""The aiohttp review app: one participant, one case at a time, over 127.0.0.1 by default.

Routes (every session route is under `/s/<token>`, where the token is the participant's
per-session access token; an unknown token gets 403 and no page content):

- `GET /s/<token>`: the open case (issued on first view), the paused page or the finished page;
- `POST /s/<token>/submit`: the finding form, validated with `validate_response`;
- `POST /s/<token>/pause` and `/resume`: stop and restart the case clock.

Nothing else is served: no static files, no run-folder files, no API. Responses carry a strict
Content-Security-Policy (no external or scripted content), `no-store` and `no-referrer` (the
token is in the URL).
"""

from __future__ import annotations

import hmac
from typing import Any

from aiohttp import web

from trustbench.rtb.human._pages import recommendation_text, render, review_page
from trustbench.rtb.human._store import SessionStore

STORE_KEY: web.AppKey[SessionStore] = web.AppKey("store", SessionStore)
"""Where the app keeps its session store."""
TOKENS_KEY: web.AppKey[dict[str, str]] = web.AppKey("tokens", dict)
"""Where the app keeps token -> candidate."""
PROMPT_KEY: web.AppKey[str] = web.AppKey("prompt", str)
"""Where the app keeps the shared review prompt."""

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", headers=_HEADERS)


def _candidate(request: web.Request) -> str:
    """The candidate whose token is in the URL (constant-time comparison), or 403."""
    token = request.match_info["token"]
    found = None
    for known, candidate in request.app[TOKENS_KEY].items():
        if hmac.compare_digest(known.encode(), token.encode()):
            found = candidate
    if found is None:
        raise web.HTTPForbidden(
            text=render(
                "landing.html.j2",
                heading="Unknown session link",
                message="This link does not open a review session. Use the link you were given.",
            ),
            content_type="text/html",
            headers=_HEADERS,
        )
    return found


def _page(
    request: web.Request, candidate: str, *, error: str | None = None, form: Any = None
) -> web.Response:
    store = request.app[STORE_KEY]
    session = store.sessions[candidate]
    base = f"/s/{request.match_info['token']}"
    if session.paused:
        return _html(render("paused.html.j2", base=base))
    opened = store.open_case(candidate)
    if opened is None:
        return _html(render("finished.html.j2", total=len(session.plan.order)))
    clock, candidate_input = opened
    plan = session.plan
    recommendation = None
    if plan.shows_recommendation:
        recommendation = recommendation_text(
            store.recommendation_labels[candidate], plan.recommendations.get(clock.case_id)
        )
    return _html(
        review_page(
            base=base,
            candidate_input=candidate_input,
            prompt=request.app[PROMPT_KEY],
            position=session.position,
            total=len(plan.order),
            time_limit_s=plan.participant.time_limit_s,
            recommendation=recommendation,
            error=error,
            form=form,
        )
    )


async def _landing(request: web.Request) -> web.Response:
    return _html(
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
    data = await request.post()
    form = {
        "evaluation_id": str(data.get("evaluation_id", "")),
        "decision": data.get("decision"),
        "reason_codes": [str(v) for v in data.getall("reason_codes", [])],
        "evidence_refs": [str(v) for v in data.getall("evidence_refs", [])],
        "explanation": str(data.get("explanation", "")),
    }
    result = request.app[STORE_KEY].submit(candidate, form)
    if result.recorded:
        raise web.HTTPSeeOther(f"/s/{request.match_info['token']}", headers=_HEADERS)
    return _page(request, candidate, error=result.reason, form=form)


async def _pause(request: web.Request) -> web.Response:
    candidate = _candidate(request)
    request.app[STORE_KEY].pause(candidate)
    raise web.HTTPSeeOther(f"/s/{request.match_info['token']}", headers=_HEADERS)


async def _resume(request: web.Request) -> web.Response:
    candidate = _candidate(request)
    request.app[STORE_KEY].resume(candidate)
    raise web.HTTPSeeOther(f"/s/{request.match_info['token']}", headers=_HEADERS)


def build_app(store: SessionStore, tokens: dict[str, str], prompt: str) -> web.Application:
    """The review app over a session store.

    Args:
        store: Sessions persisted through the run's ledger.
        tokens: Access token -> human candidate name (one per participant).
        prompt: The shared review prompt (shown as the participant's instructions).
    """
    app = web.Application(client_max_size=64 * 1024)
    app[STORE_KEY] = store
    app[TOKENS_KEY] = dict(tokens)
    app[PROMPT_KEY] = prompt
    app.router.add_get("/", _landing)
    app.router.add_get("/s/{token}", _show)
    app.router.add_post("/s/{token}/submit", _submit)
    app.router.add_post("/s/{token}/pause", _pause)
    app.router.add_post("/s/{token}/resume", _resume)
    return app
