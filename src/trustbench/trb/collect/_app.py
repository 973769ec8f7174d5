"""The aiohttp collection app: one participant, one trace step at a time, on 127.0.0.1.

Routes (session routes are under `/s/<token>`, the participant's access token):

- `GET /s/<token>`: the open item (its display recorded on first view), its Track 3 outcome
  question once answered, the finished page, or the withdrawn page;
- `POST /s/<token>/answer`: the continuation chosen under r' (`nonce`, `action`, `note`);
- `POST /s/<token>/attribute`: the cause of a Track 3 outcome (`nonce`, `cause`);
- `POST /s/<token>/withdraw`: leave the study (`confirm=yes`).

Nothing else is served: no static files, no folder files, no API. The guards (token, `Host`,
`Origin`, malformed bodies answered 400) are `trustbench._local_app`'s, shared with the RTB
human review app.
"""

from __future__ import annotations

from aiohttp import web

from trustbench._local_app import (
    back_to_session,
    check_origin,
    format_limit,
    html,
    new_app,
    posted_form,
    session_owner,
)
from trustbench.trb.collect._pages import item_page, message_page, outcome_page
from trustbench.trb.collect._store import CollectionStore

STORE_KEY: web.AppKey[CollectionStore] = web.AppKey("store", CollectionStore)
"""Where the app keeps its session store."""


async def _text_form(request: web.Request) -> dict[str, str]:
    """The posted form as text fields; 400 when it cannot be parsed."""
    return {key: str(value) for key, value in (await posted_form(request)).items()}


def _participant(request: web.Request) -> str:
    return session_owner(
        request, lambda: message_page("Unknown session link", "Use the link you were given.")
    )


def _page(request: web.Request, participant: str, error: str | None = None) -> web.Response:
    store = request.app[STORE_KEY]
    session = store.sessions[participant]
    base = f"/s/{request.match_info['token']}"
    if session.withdrawn:
        return html(message_page("You have withdrawn", "None of your answers will be used."))
    opened = store.open_item(participant)
    total = len(session.order)
    if opened is None:
        return html(message_page("Session complete", f"Thank you: all {total} items are recorded."))
    item, shown = opened
    progress = f"item {session.position + 1} of {total}"
    trace = store.frozen.trace(item.trace_id)
    answer = session.answers.get(item.item_id)
    if answer is not None:  # a Track 3 item answered: ask what caused its outcome
        outcome = answer["outcome"]
        return html(
            outcome_page(
                base=base, length=trace.world.length, action=answer["action"],
                before=outcome["cell_before"], after=outcome["cell_after"],
                nonce=shown["nonce"], progress=progress, error=error,
            )
        )  # fmt: skip
    rules = store.frozen.protocol.session
    return html(
        item_page(
            base=base, trace=trace, t=item.t, k=item.k, nonce=shown["nonce"],
            progress=progress, time_limit=format_limit(rules.time_limit_s),
            show_model_continuation=rules.show_model_continuation, error=error,
        )
    )  # fmt: skip


async def _landing(request: web.Request) -> web.Response:
    return html(message_page("Continuation sessions", "Open the session link you were given."))


async def _show(request: web.Request) -> web.Response:
    return _page(request, _participant(request))


def _after(request: web.Request, participant: str, problem: str | None) -> web.Response:
    if problem is None:
        raise back_to_session(request)
    return _page(request, participant, error=problem)


async def _answer(request: web.Request) -> web.Response:
    participant = _participant(request)
    check_origin(request)
    form = await _text_form(request)
    return _after(request, participant, request.app[STORE_KEY].answer(participant, form))


async def _attribute(request: web.Request) -> web.Response:
    participant = _participant(request)
    check_origin(request)
    form = await _text_form(request)
    return _after(request, participant, request.app[STORE_KEY].attribute(participant, form))


async def _withdraw(request: web.Request) -> web.Response:
    participant = _participant(request)
    check_origin(request)
    form = await _text_form(request)
    if form.get("confirm") != "yes":
        return _page(request, participant, error="tick the box to confirm the withdrawal")
    request.app[STORE_KEY].withdraw(participant)
    raise back_to_session(request)


def build_app(store: CollectionStore, tokens: dict[str, str]) -> web.Application:
    """The collection app over a session store.

    Args:
        store: Sessions persisted through the folder's ledger.
        tokens: Access token -> participant pseudonym.
    """
    app = new_app(tokens, _landing, _show)
    app[STORE_KEY] = store
    app.router.add_post("/s/{token}/answer", _answer)
    app.router.add_post("/s/{token}/attribute", _attribute)
    app.router.add_post("/s/{token}/withdraw", _withdraw)
    return app
