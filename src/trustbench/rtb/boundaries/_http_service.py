"""A local example of the `http` boundary's service side, wrapping a Python boundary.

It hosts one `SimulatedPlatform` per trial and a boundary that enforces on it, and exposes the
wire contract in `_http.py`. Tests and the demo run it on 127.0.0.1; a user's own service would
implement the same endpoints over their real (or staging) platform.
"""

from __future__ import annotations

from aiohttp import web

from trustbench.rtb.boundaries._protocol import Authorization, Boundary, BoundaryFactory
from trustbench.rtb.boundaries._python import PythonPolicyBoundary
from trustbench.rtb.boundaries._target import InjectAction, apply_action
from trustbench.rtb.platform import ControlRequest, PlatformSeed, SimulatedPlatform

_TRIALS = web.AppKey("trials", dict[str, tuple[SimulatedPlatform, Boundary]])


def reference_service_app(
    boundary_factory: BoundaryFactory = PythonPolicyBoundary,
) -> web.Application:
    """Build the aiohttp application.

    Args:
        boundary_factory: The boundary the service enforces with (default: `reference`).

    Returns:
        An application serving the `http` boundary wire contract.
    """
    app = web.Application()
    app[_TRIALS] = {}

    def trial(request: web.Request) -> tuple[SimulatedPlatform, Boundary]:
        trial_id = request.match_info["trial_id"]
        if trial_id not in app[_TRIALS]:
            raise web.HTTPNotFound(text=f"unknown trial {trial_id!r}")
        return app[_TRIALS][trial_id]

    async def open_trial(request: web.Request) -> web.Response:
        body = await request.json()
        seed = PlatformSeed.model_validate(body["seed"])
        app[_TRIALS][body["trial_id"]] = (
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
        del app[_TRIALS][request.match_info["trial_id"]]
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
