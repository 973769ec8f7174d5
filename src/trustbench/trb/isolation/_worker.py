"""The adapter worker's side: the session that holds a user adapter and sees only contexts.

The sandbox's one worker (`trustbench.sandbox.CandidateWorker`, started by
`_client.AdapterWorker`) confines itself (its own user, IPC and network namespaces, then
Landlock; the audit-hook fallback only where a test asks for it; where neither can be set up it
refuses to serve) and only then imports its entry, `serve`, which the harness calls with the
adapter's `MODULE:FACTORY`: the factory's import-time code runs sandboxed. The session it
returns answers the harness's calls: build a fresh adapter (in a world with its own slots, after
finding that world here, `_slot_world`), seed it, `emit_r`, `act`, their batched forms
(`emit_many` and `act_many` when the adapter has them), switch its report encoding, run the
conformance kit, and close an adapter (its `close()` is called, as docs/trb.md says).

Nothing but contexts and overrides crosses the pipe: the harness keeps the traces, Phi(r'), the
labels and the split names, and sends each context with an opaque trace id. In a world with its
own slots the same holds: a `SlotContext` (observations so far) and a harness-built `SlotReport`
r' go in, a report or a distribution comes out, and the harness checks it against the world's
declaration (the worker's own checks are the candidate's and are not trusted). The answers are
plain JSON (never pickle: the harness must not execute what an adapter sends back).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
from collections.abc import Callable, Iterable
from typing import Any

from trustbench.trb.adapter._protocol import StepContext


def _jsonable(value: Any) -> Any:
    """A hook's output as JSON: a report's fields, a distribution's floats, else its repr."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return {"report": dump(mode="json")}
    if isinstance(value, dict):
        if any(isinstance(v, str | bytes | bool) for v in value.values()):
            # float() would read "0.25" or True as a probability here, where the harness's
            # `distribution_problem` cannot see it any more (an outside attacker's booleans
            # were counted as 1 and 0): a malformed answer, never a valid one
            return {"invalid": repr(value)[:200]}
        try:
            return {"value": {str(k): float(v) for k, v in value.items()}}
        except (TypeError, ValueError):
            return {"invalid": repr(value)[:200]}
    return {"invalid": repr(value)[:200]}


class _Session:
    """The adapters of one worker by handle, and the dispatch of one request.

    Its state is private: the session crosses to the harness by reference, which sees only
    its methods.
    """

    def __init__(self, factory: Any) -> None:
        self._factory = factory
        self._adapters: dict[int, Any] = {}
        self._slot_handles: set[int] = set()
        """Handles of adapters acting in a world with its own slots (`SlotContext` in)."""
        self._next_handle = 0

    def _r(self, handle: int, raw: Any) -> Any:
        from trustbench.trb.adapter._protocol import SelfReport
        from trustbench.trb.world._slots import SlotReport

        if raw is None:
            return None
        report = SlotReport if handle in self._slot_handles else SelfReport
        return report.model_validate(raw)

    def _contexts(self, handle: int, raw: list[Any]) -> list[Any]:
        from trustbench.trb.world._slots import SlotContext

        context = SlotContext if handle in self._slot_handles else StepContext
        return [context.model_validate(c) for c in raw]

    def new(self, world: dict[str, str] | None = None) -> dict[str, Any]:
        """Build a fresh adapter; its handle and what the harness needs to know of it.

        `world`: for a trace of a world with its own slots, its id and declaration digest
        (`sha256`). The world is found here as plug-in worlds are found (`_slot_world`) and
        given to an adapter that asks for it with `use_world(world)`.
        """
        found = None if world is None else _slot_world(world["id"], world["sha256"])
        adapter = self._factory()
        self._next_handle += 1
        self._adapters[self._next_handle] = adapter
        if found is not None:
            self._slot_handles.add(self._next_handle)
            use_world: Callable[[Any], Any] | None = getattr(adapter, "use_world", None)
            if callable(use_world):
                use_world(found)
        tier = getattr(adapter, "tier", None)
        return {
            "handle": self._next_handle,
            "name": str(getattr(adapter, "name", "?")),
            "tier": None if tier is None else str(getattr(tier, "value", tier)),
            "supports_override": bool(getattr(adapter, "supports_override", False)),
            "use_encoding": callable(getattr(adapter, "use_encoding", None)),
            "continuation_logprob": callable(getattr(adapter, "continuation_logprob", None)),
        }

    def call(self, request: dict[str, Any]) -> Any:
        """Run one hook of an adapter (`request`: its handle, the hook and its arguments)."""
        adapter = self._adapters[int(request["handle"])]
        hook = request["hook"]
        if hook == "seed":
            adapter.seed(int(request["value"]))
            return None
        if hook == "use_encoding":
            from trustbench.trb.proxy._local import SLOT_ENCODINGS

            adapter.use_encoding(SLOT_ENCODINGS[request["encoding"]])
            return None
        handle = int(request["handle"])
        contexts = self._contexts(handle, request["contexts"])
        if hook == "emit_r":
            answers = _batched(getattr(adapter, "emit_many", None), contexts)
            if answers is not None:
                return answers
            return [_guarded(lambda c=c: adapter.emit_r(c)) for c in contexts]
        overrides = [self._r(handle, r) for r in request["overrides"]]
        if hook == "continuation_logprob":
            return _scored_text(adapter, contexts[0], overrides[0], str(request["continuation"]))
        answers = _batched(getattr(adapter, "act_many", None), contexts, overrides)
        if answers is not None:
            return answers
        return [
            _guarded(lambda c=c, r=r: adapter.act(c, r_override=r))
            for c, r in zip(contexts, overrides, strict=True)
        ]

    def close(self, handle: int) -> None:
        """Drop an adapter, calling its `close()` when it has one (its failure is its own)."""
        adapter = self._adapters.pop(handle, None)
        self._slot_handles.discard(handle)
        close: Callable[[], Any] | None = getattr(adapter, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):  # a failing close() must not stop the worker
                close()

    def conformance(self, n_traces: int, slot_world: bool = False) -> list[dict[str, Any]]:
        """The conformance kit's results on the factory (as JSON).

        `slot_world`: the corpus is of a world with its own slots, where the kit checks what
        needs no corridor context (`check_slot_adapter`).
        """
        from trustbench.trb.adapter._conformance import check_adapter, check_slot_adapter

        checks = (
            check_slot_adapter(self._factory)
            if slot_world
            else check_adapter(self._factory, n_traces=n_traces)
        )
        return [c.model_dump(mode="json") for c in checks]


def _slot_world(world_id: str, sha256: str) -> Any:
    """The world with its own slots `world_id`, as this sandboxed process finds it.

    Found the way plug-in worlds are everywhere (`world_for`): registered by code imported
    here (the adapter's module calling `register_world`) or by an entry point in the group
    `trustbench.trb_worlds`. A world registered only in the harness process is not here.

    Raises:
        LookupError: not found here, not a world with its own slots, or declared otherwise than
            the corpus's world (its digest differs), naming which.
    """
    from trustbench.errors import InputError
    from trustbench.trb.world import SlotWorld, declaration_sha256, world_for

    try:
        world = world_for(world_id)
    except InputError:
        raise LookupError(
            f"world {world_id} is not registered in the sandboxed adapter worker (a world "
            "registered only in the harness process is not seen there): register it in the "
            "adapter's module (register_world) or by an entry point in trustbench.trb_worlds"
        ) from None
    if not isinstance(world, SlotWorld):
        raise LookupError(f"world {world_id} in the sandboxed worker declares no slots of its own")
    found = declaration_sha256(world.declaration)
    if found != sha256:
        raise LookupError(
            f"world {world_id} in the sandboxed worker is declared otherwise ({found}) than the "
            f"corpus's ({sha256})"
        )
    return world


def _batched(hook: Callable[..., Iterable[Any]] | None, *batch: list[Any]) -> list[Any] | None:
    """A batched hook's answers as JSON, or None: no hook, one item, or a failed batch.

    The contract (`BatchedAdapter`): item i's answer is what the one-context hook gives, so a
    batch that raises or answers another number of items is asked again one by one.
    """
    if not callable(hook) or len(batch[0]) < 2:
        return None
    try:
        answers = list(hook(*batch))
    except Exception:  # the candidate's failure: asked one by one by the caller
        return None
    return [_jsonable(a) for a in answers] if len(answers) == len(batch[0]) else None


def _scored_text(adapter: Any, context: Any, override: Any, text: str) -> dict[str, Any]:
    """`continuation_logprob`'s answer as JSON: the float, or the error it raised."""
    try:
        logprob = adapter.continuation_logprob(context, override, text)
    except Exception as error:  # reported to the harness: an invalid answer, never a default
        return {"error": f"{type(error).__name__}: {error}"[:500]}
    if isinstance(logprob, str | bytes | bool):  # not a number the adapter stated: invalid
        return {"error": f"continuation_logprob returned {logprob!r}, not a number"[:500]}
    try:
        return {"logprob": float(logprob)}
    except (TypeError, ValueError) as error:
        return {"error": f"{type(error).__name__}: {error}"[:500]}


def _guarded(fn: Any) -> Any:
    try:
        return _jsonable(fn())
    except Exception as error:  # reported to the harness, which counts it against the adapter
        return {"error": f"{type(error).__name__}: {error}"[:500]}


def serve(factory: str) -> _Session:
    """The session of the adapter factory `factory` (`MODULE:FACTORY`), imported here.

    The sandbox worker's entry: it is called once the worker is confined, so the factory's
    import-time code runs sandboxed.
    """
    from trustbench._imports import import_object

    return _Session(import_object(factory, what="adapter factory"))


# ------------------------------------------------------------------------------------------------
# Opaque trace ids: what an adapter is told a trace is called, unlinkable to the corpus.
#
# A corpus trace id names its split (`eval-0003`, `transfer_wind-0001`): an adapter reading it
# knows which contexts are evaluated and can key a memorised answer table by it. The harness
# sends `trace-<16 hex>` instead: HMAC-SHA256 of the real id under a per-run key (the frozen
# manifest's SHA-256, which the adapter cannot read), so the same trace gets the same id on a
# resumed run and no adapter can compute the mapping.


def opaque_trace_id(trace_id: str, key: str) -> str:
    """The id an adapter sees for `trace_id` in the run keyed by `key`."""
    digest = hmac.new(key.encode(), trace_id.encode(), hashlib.sha256).hexdigest()
    return f"trace-{digest[:16]}"


def blind_context(context: StepContext, key: str) -> StepContext:
    """The context with its trace id replaced by the opaque one."""
    return context.model_copy(update={"trace_id": opaque_trace_id(context.trace_id, key)})
