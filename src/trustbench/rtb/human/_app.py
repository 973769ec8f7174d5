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

import hmac
import ipaddress
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from trustbench.rtb.human._discrepancies import FORMAT as DISCREPANCY_FORMAT
from trustbench.rtb.human._pages import recommendation_text, render, review_page
from trustbench.rtb.human._store import SessionStore

STORE_KEY: web.AppKey[SessionStore] = web.AppKey("store", SessionStore)
"""Where the app keeps its session store."""
TOKENS_KEY: web.AppKey[dict[str, str]] = web.AppKey("tokens", dict)
"""Where the app keeps token -> candidate."""
PROMPT_KEY: web.AppKey[str] = web.AppKey("prompt", str)
REASONS_KEY: web.AppKey[dict[str, str]] = web.AppKey("reason_meaning", dict)
"""The corpus policy's reason codes -> meanings: the finding form's choices."""
"""Where the app keeps the shared review prompt."""

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",
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


def _check_origin(request: web.Request) -> None:
    """403 unless the POST comes from this app's own pages.

    Accepted evidence: an `Origin` (or, lacking one, a `Referer`) naming this scheme and host, or
    `Sec-Fetch-Site: same-origin` (set by the browser itself; a page cannot forge it).
    """
    if request.headers.get("Sec-Fetch-Site") == "same-origin":
        return
    source = request.headers.get("Origin") or request.headers.get("Referer")
    parts = urlsplit(source) if source and source != "null" else None
    if parts is None or parts.scheme != request.scheme or parts.netloc != request.host:
        raise web.HTTPForbidden(
            text="cross-origin or origin-less form posts are refused", headers=_HEADERS
        )


async def _form(request: web.Request) -> dict[str, Any]:
    """The submitted finding form as text fields; 400 when it cannot be parsed."""
    try:
        data = await request.post()
    except web.HTTPException:
        raise
    except (
        ValueError,
        AssertionError,
        LookupError,
        RuntimeError,
        TypeError,
        HttpProcessingError,
    ) as error:
        # aiohttp raises these for a broken body: no boundary, truncated parts, a header line
        # it cannot parse, an unknown charset or transfer encoding (found by fuzzing).
        raise web.HTTPBadRequest(text=f"malformed form: {error}", headers=_HEADERS) from None
    if any(not isinstance(value, str) for value in data.values()):
        raise web.HTTPBadRequest(text="malformed form: only text fields", headers=_HEADERS)
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
            reason_meaning=request.app[REASONS_KEY],
            discrepancy_format=DISCREPANCY_FORMAT if store.structured_discrepancies else None,
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
    _check_origin(request)
    form = await _form(request)
    result = request.app[STORE_KEY].submit(candidate, form)
    if result.recorded:
        raise web.HTTPSeeOther(f"/s/{request.match_info['token']}", headers=_HEADERS)
    return _page(request, candidate, error=result.reason, form=form)


async def _pause(request: web.Request) -> web.Response:
    candidate = _candidate(request)
    _check_origin(request)
    request.app[STORE_KEY].pause(candidate)
    raise web.HTTPSeeOther(f"/s/{request.match_info['token']}", headers=_HEADERS)


async def _resume(request: web.Request) -> web.Response:
    candidate = _candidate(request)
    _check_origin(request)
    request.app[STORE_KEY].resume(candidate)
    raise web.HTTPSeeOther(f"/s/{request.match_info['token']}", headers=_HEADERS)


def _served_hosts(request: web.Request) -> set[str]:
    """The `Host` values that name the address this connection reached (DNS-rebinding guard)."""
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    if not sockname:
        return set()
    address, port = str(sockname[0]), int(sockname[1])
    literal = f"[{address}]" if ":" in address else address
    names = {f"{literal}:{port}"}
    if ipaddress.ip_address(address.split("%")[0]).is_loopback:
        names |= {f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"}
    if port == 80:  # a client may leave the default port out
        names |= {name.rsplit(":", 1)[0] for name in names}
    return names


@web.middleware
async def _host_guard(request: web.Request, handler: Any) -> web.StreamResponse:
    """403 unless `Host` names the address the app serves.

    A DNS-rebinding page (`evil.example` resolved to 127.0.0.1) reaches the app with
    `Host: evil.example:PORT` and an `Origin` to match, which the origin check alone accepts.
    """
    if request.headers.get("Host", "").lower() not in _served_hosts(request):
        raise web.HTTPForbidden(
            text="the Host header does not name the address this app serves", headers=_HEADERS
        )
    return await handler(request)


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
    app = web.Application(client_max_size=64 * 1024, middlewares=[_host_guard])
    app[STORE_KEY] = store
    app[TOKENS_KEY] = dict(tokens)
    app[PROMPT_KEY] = prompt
    app[REASONS_KEY] = dict(reason_meaning)
    app.router.add_get("/", _landing)
    app.router.add_get("/s/{token}", _show)
    app.router.add_post("/s/{token}/submit", _submit)
    app.router.add_post("/s/{token}/pause", _pause)
    app.router.add_post("/s/{token}/resume", _resume)
    return app
