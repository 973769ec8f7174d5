"""The `http` boundary: a user's own enforcement service, reached over HTTP.

Wire contract (JSON bodies; the models are this package's pydantic models):

- `POST {url}/harness/trials` `{"trial_id", "seed": PlatformSeed}`: fresh state for one trial.
- `POST {url}/harness/trials/{trial_id}/inject` `InjectAction`: a fault or actor step.
- `POST {url}/harness/trials/{trial_id}/settle` `{"deadline_s"}`: run the observer to the deadline.
- `DELETE {url}/harness/trials/{trial_id}`: drop the trial's state.
- `POST {url}/trials/{trial_id}/authorize` `{"request": ControlRequest}` -> `Authorization`.
- `POST {url}/trials/{trial_id}/dispatch` `{"request", "authorization"}` -> `DispatchReceipt`.
- `GET {url}/observer/trials/{trial_id}/effects` -> `[EffectEntry]`: the service's observer log.

The grader verifies the fetched log's hash chain and evidence completeness like a local one. The
result's environment strength is `external service <URL>`: whatever the service says it runs on,
the harness only knows it reached that URL.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

import aiohttp
from pydantic import TypeAdapter

from trustbench.rtb.boundaries._protocol import (
    Authorization,
    Boundary,
    BoundaryFactory,
    DispatchReceipt,
    Enforcement,
)
from trustbench.rtb.boundaries._python import PythonPolicyBoundary
from trustbench.rtb.boundaries._target import InjectAction, apply_action
from trustbench.rtb.platform import ControlRequest, EffectEntry, PlatformSeed, SimulatedPlatform

if TYPE_CHECKING:
    from aiohttp import web

_ENTRIES = TypeAdapter(list[EffectEntry])
_TIMEOUT = aiohttp.ClientTimeout(total=30)


class RemoteTrialView:
    """What the `http` boundary receives instead of a `PlatformView`: the trial's id only.

    The platform lives in the remote service; nothing here reads or changes it.
    """

    __slots__ = ("trial_id",)

    def __init__(self, trial_id: str) -> None:
        self.trial_id = trial_id


async def _post(url: str, body: dict[str, Any]) -> Any:
    async with (
        aiohttp.ClientSession(timeout=_TIMEOUT) as client,
        client.post(url, json=body) as response,
    ):
        response.raise_for_status()
        return await response.json() if response.status != 204 else None


class HttpBoundary:
    """Posts each request to the service's authorize and dispatch endpoints.

    Args:
        base_url: The service root, e.g. `http://127.0.0.1:8750`.
        name: Name recorded with results.
    """

    enforcement: Enforcement = "enforcing"
    """A user's service under test is judged as a candidate (its failure blocks release)."""

    def __init__(self, base_url: str, name: str = "http") -> None:
        self.name = name
        self._url = base_url.rstrip("/")

    async def authorize(self, request: ControlRequest, platform: Any) -> Authorization:
        """POST the request to `/trials/{id}/authorize`."""
        data = await _post(
            f"{self._url}/trials/{platform.trial_id}/authorize",
            {"request": request.model_dump(mode="json")},
        )
        return Authorization.model_validate(data)

    async def dispatch(
        self, request: ControlRequest, authorization: Authorization | None, platform: Any
    ) -> DispatchReceipt:
        """POST the request (and authorization, if any) to `/trials/{id}/dispatch`."""
        data = await _post(
            f"{self._url}/trials/{platform.trial_id}/dispatch",
            {
                "request": request.model_dump(mode="json"),
                "authorization": authorization.model_dump(mode="json") if authorization else None,
            },
        )
        return DispatchReceipt.model_validate(data)


class _HttpSession:
    def __init__(self, url: str, trial_id: str) -> None:
        self._url = url
        self._trial = trial_id
        self.view = RemoteTrialView(trial_id)
        self.environment_strength = f"external service {url}"

    async def inject(self, action: InjectAction) -> None:
        await _post(
            f"{self._url}/harness/trials/{self._trial}/inject", action.model_dump(mode="json")
        )

    async def settle(self, deadline_s: float) -> None:
        await _post(f"{self._url}/harness/trials/{self._trial}/settle", {"deadline_s": deadline_s})

    async def observer_entries(self) -> list[EffectEntry]:
        async with (
            aiohttp.ClientSession(timeout=_TIMEOUT) as client,
            client.get(f"{self._url}/observer/trials/{self._trial}/effects") as response,
        ):
            response.raise_for_status()
            return _ENTRIES.validate_python(await response.json())

    async def close(self) -> None:
        async with (
            aiohttp.ClientSession(timeout=_TIMEOUT) as client,
            client.delete(f"{self._url}/harness/trials/{self._trial}") as response,
        ):
            response.raise_for_status()


class HttpEnvironment:
    """Trials hosted by an external service implementing the wire contract above.

    Args:
        base_url: The service root.
    """

    def __init__(self, base_url: str) -> None:
        self._url = base_url.rstrip("/")

    async def open_trial(self, trial_id: str, seed: PlatformSeed) -> _HttpSession:
        """Ask the service for fresh state for `trial_id`."""
        await _post(
            f"{self._url}/harness/trials",
            {"trial_id": trial_id, "seed": seed.model_dump(mode="json")},
        )
        return _HttpSession(self._url, trial_id)


def new_trial_id() -> str:
    """An unpredictable trial id (the service must not be able to guess future trials)."""
    return f"trial-{secrets.token_hex(8)}"


# ------------------------------------------------------------------------------------------------
# A local example of the `http` boundary's service side, wrapping a Python boundary.
#
# It hosts one `SimulatedPlatform` per trial and a boundary that enforces on it, and exposes the
# wire contract in `_http.py`. Tests and the demo run it on 127.0.0.1; a user's own service would
# implement the same endpoints over their real (or staging) platform.


def reference_service_app(
    boundary_factory: BoundaryFactory = PythonPolicyBoundary,
) -> web.Application:
    """Build the aiohttp application.

    Args:
        boundary_factory: The boundary the service enforces with (default: `reference`).

    Returns:
        An application serving the `http` boundary wire contract.
    """
    from aiohttp import web  # the server side: a run's client never loads it (about 30 ms)

    # The trials live in this closure, not under an `AppKey`: aiohttp names a key after the
    # module whose top-level frame is on the stack, and a service started from a thread has none.
    trials: dict[str, tuple[SimulatedPlatform, Boundary]] = {}
    app = web.Application()

    def trial(request: web.Request) -> tuple[SimulatedPlatform, Boundary]:
        trial_id = request.match_info["trial_id"]
        if trial_id not in trials:
            raise web.HTTPNotFound(text=f"unknown trial {trial_id!r}")
        return trials[trial_id]

    async def open_trial(request: web.Request) -> web.Response:
        body = await request.json()
        seed = PlatformSeed.model_validate(body["seed"])
        trials[body["trial_id"]] = (
            SimulatedPlatform(body["trial_id"], seed),
            boundary_factory(),
        )
        return web.json_response({"trial_id": body["trial_id"]}, status=201)

    async def inject(request: web.Request) -> web.Response:
        platform, _ = trial(request)
        apply_action(platform, InjectAction.model_validate(await request.json()))
        return web.Response(status=204)

    async def settle(request: web.Request) -> web.Response:
        platform, _ = trial(request)
        platform.settle(float((await request.json())["deadline_s"]))
        return web.Response(status=204)

    async def close_trial(request: web.Request) -> web.Response:
        trial(request)
        del trials[request.match_info["trial_id"]]
        return web.Response(status=204)

    async def authorize(request: web.Request) -> web.Response:
        platform, boundary = trial(request)
        body = await request.json()
        result = await boundary.authorize(
            ControlRequest.model_validate(body["request"]), platform.view
        )
        return web.json_response(result.model_dump(mode="json"))

    async def dispatch(request: web.Request) -> web.Response:
        platform, boundary = trial(request)
        body = await request.json()
        authorization = (
            Authorization.model_validate(body["authorization"]) if body["authorization"] else None
        )
        receipt = await boundary.dispatch(
            ControlRequest.model_validate(body["request"]), authorization, platform.view
        )
        return web.json_response(receipt.model_dump(mode="json"))

    async def effects(request: web.Request) -> web.Response:
        platform, _ = trial(request)
        entries = platform.observer_reader().entries()
        return web.json_response([e.model_dump(mode="json") for e in entries])

    app.router.add_post("/harness/trials", open_trial)
    app.router.add_post("/harness/trials/{trial_id}/inject", inject)
    app.router.add_post("/harness/trials/{trial_id}/settle", settle)
    app.router.add_delete("/harness/trials/{trial_id}", close_trial)
    app.router.add_post("/trials/{trial_id}/authorize", authorize)
    app.router.add_post("/trials/{trial_id}/dispatch", dispatch)
    app.router.add_get("/observer/trials/{trial_id}/effects", effects)
    return app
