"""The adapter worker: a separate process that holds a user adapter and sees only contexts.

Started by `_client.AdapterWorker` as `python -m trustbench.trb.isolation._worker`, in its own
empty folder (its working directory, HOME, TMPDIR and TRUSTBENCH_CACHE), it reads one JSON line
of configuration (the factory, the paths it may read), restricts itself (Landlock, else the audit
hook fallback), and only then imports the adapter's module: import-time code runs sandboxed.
After that it answers one JSON line per request: build a fresh adapter, seed it, `emit_r`,
`act`, their batched forms, switch its report encoding, run the conformance kit.

Nothing but contexts and overrides crosses the pipe: the harness keeps the traces, Phi(r'), the
labels and the split names, and sends each context with an opaque trace id. The answers are
plain JSON (never pickle: the harness must not execute what an adapter sends back). The
protocol uses a duplicate of the original stdout; the adapter's own prints go to stderr.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from typing import IO, Any

from trustbench.trb.isolation import _audit_hook, _landlock


def _jsonable(value: Any) -> Any:
    """A hook's output as JSON: a report's fields, a distribution's floats, else its repr."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return {"report": dump(mode="json")}
    if isinstance(value, dict):
        try:
            return {"value": {str(k): float(v) for k, v in value.items()}}
        except (TypeError, ValueError):
            return {"invalid": repr(value)[:200]}
    return {"invalid": repr(value)[:200]}


class _Session:
    """The adapters of one worker by handle, and the dispatch of one request."""

    def __init__(self, factory: Any) -> None:
        from trustbench.trb.adapter._schema import SelfReport, StepContext

        self.factory = factory
        self.adapters: dict[int, Any] = {}
        self.next_handle = 0
        self.report = SelfReport
        self.context = StepContext

    def _r(self, raw: Any) -> Any:
        return None if raw is None else self.report.model_validate(raw)

    def new(self) -> dict[str, Any]:
        adapter = self.factory()
        self.next_handle += 1
        self.adapters[self.next_handle] = adapter
        tier = getattr(adapter, "tier", None)
        return {
            "handle": self.next_handle,
            "name": str(getattr(adapter, "name", "?")),
            "tier": None if tier is None else str(getattr(tier, "value", tier)),
            "supports_override": bool(getattr(adapter, "supports_override", False)),
            "use_encoding": callable(getattr(adapter, "use_encoding", None)),
        }

    def call(self, request: dict[str, Any]) -> Any:
        adapter = self.adapters[int(request["handle"])]
        hook = request["hook"]
        if hook == "seed":
            adapter.seed(int(request["value"]))
            return None
        if hook == "use_encoding":
            from trustbench.trb.proxy._slots import SLOT_ENCODINGS

            adapter.use_encoding(SLOT_ENCODINGS[request["encoding"]])
            return None
        contexts = [self.context.model_validate(c) for c in request["contexts"]]
        if hook == "emit_r":
            return [_guarded(lambda c=c: adapter.emit_r(c)) for c in contexts]
        overrides = [self._r(r) for r in request["overrides"]]
        batched: Callable[[list[Any], list[Any]], Iterable[Any]] | None = getattr(
            adapter, "act_many", None
        )
        if len(contexts) > 1 and callable(batched):
            try:
                answers = list(batched(contexts, overrides))
                if len(answers) == len(contexts):
                    return [_jsonable(a) for a in answers]
            except Exception:  # the candidate's failure: asked one by one below
                pass
        return [
            _guarded(lambda c=c, r=r: adapter.act(c, r_override=r))
            for c, r in zip(contexts, overrides, strict=True)
        ]

    def conformance(self, n_traces: int) -> list[dict[str, Any]]:
        from trustbench.trb.adapter._conformance import check_adapter

        return [c.model_dump() for c in check_adapter(self.factory, n_traces=n_traces)]


def _guarded(fn: Any) -> Any:
    try:
        return _jsonable(fn())
    except Exception as error:  # reported to the harness, which counts it against the adapter
        return {"error": f"{type(error).__name__}: {error}"[:500]}


def _serve(session: _Session, inbox: IO[bytes], outbox: IO[bytes]) -> None:
    for line in inbox:
        request = json.loads(line)
        try:
            op = request["op"]
            if op == "new":
                reply: Any = {"ok": session.new()}
            elif op == "call":
                reply = {"ok": session.call(request)}
            elif op == "close":
                session.adapters.pop(int(request["handle"]), None)
                reply = {"ok": None}
            elif op == "conformance":
                reply = {"ok": session.conformance(int(request["n_traces"]))}
            else:
                reply = {"error": f"unknown op {op!r}"}
        except Exception as error:
            reply = {"error": f"{type(error).__name__}: {error}"[:500]}
        outbox.write(json.dumps(reply).encode() + b"\n")
        outbox.flush()


def main() -> None:
    """Configure, sandbox, import the factory, then serve requests until stdin closes."""
    outbox = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the adapter's prints must not corrupt the protocol
    inbox = sys.stdin.buffer
    config = json.loads(inbox.readline())
    read, write = list(config["read"]), [config["workdir"]]
    os.chdir(config["workdir"])
    try:
        if config.get("fallback"):
            raise _landlock.SandboxUnavailable("the fallback was asked for")
        mode = _landlock.restrict(read, write)
    except _landlock.SandboxUnavailable as why:
        mode = f"{_audit_hook.install(read, write)}; landlock not used: {why}"
    from trustbench._imports import import_object

    try:
        factory = import_object(config["factory"], what="adapter factory")
    except Exception as error:
        outbox.write(json.dumps({"error": f"{type(error).__name__}: {error}"}).encode() + b"\n")
        outbox.flush()
        return
    outbox.write(json.dumps({"ok": {"sandbox": mode, "pid": os.getpid()}}).encode() + b"\n")
    outbox.flush()
    _serve(_Session(factory), inbox, outbox)


if __name__ == "__main__":
    main()
