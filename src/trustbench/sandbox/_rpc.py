"""Calling a candidate's objects in its sandboxed worker: a small JSON RPC over pipes.

`CandidateWorker` starts `python -m trustbench.sandbox._rpc` in a fresh empty folder with an
allow-listed environment (`RUNTIME_VARIABLES`); the worker confines itself (`_confine.confine`),
probes what it can still read of the harness's secrets, and only then imports the candidate's
entry (`module:attr`), so import-time code runs confined. The harness then holds
`RemoteObject`s standing for the candidate's objects (a reviewer's responder, a boundary factory
and its boundaries) and calls them with the same arguments as the in-process path;
`RemoteObject`s on the worker's side stand for the harness objects passed as arguments (a
boundary's `PlatformView`), whose methods the candidate calls back.

Values cross as JSON (never pickle: the harness must not run what a candidate sends back):
pydantic models as `model_dump(mode="json")` revalidated with `model_validate`, dataclasses
field by field, datetimes as ISO text. Only classes of the trustbench package are rebuilt from
a message (a candidate's subclass crosses as its nearest trustbench base); any other object
crosses as a reference with its public plain attributes and the names of its methods. An
exception raised by a callback is re-raised in the harness as itself when it comes back out of
the candidate; any other exception of the candidate arrives as `CandidateRaised`.

Calls are whole: the harness writes a request and reads until its answer, serving the
candidate's callbacks in between. A synchronous method is called from the caller's thread; a
coroutine method is exchanged on the endpoint's own thread (`Endpoint.acall`), so the harness's
event loop keeps running (a trial timeout still fires) and the harness's coroutines it calls
back (an agent's tools) run on that loop. The worker awaits a candidate's coroutine to its end.
The tracks give a sandboxed candidate's trials turns (docs/sandbox.md), and the cost is in
`bench/sandbox_overhead.py`.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import dataclasses
import enum
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Sequence
from datetime import date, datetime
from fnmatch import fnmatchcase
from importlib import import_module
from pathlib import Path
from typing import IO, Any

from trustbench.sandbox._confine import (
    SYSTEM_READ,
    SandboxUnavailable,
    confine,
    files_starting_with,
    install_audit_hook,
    package_data,
    reachable,
    read_rules,
)


class CandidateRaised(Exception):
    """The candidate's code raised (the message names its exception type and text)."""


class WorkerFailed(Exception):
    """The worker could not start, refused to serve, or died (the message says which)."""


# ------------------------------------------------------------------------------------------------
# The codec: JSON values, trustbench models and dataclasses by value, other objects by reference.


def _type_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _trusted_base(cls: type) -> type | None:
    """The class itself or its nearest base defined in trustbench (a candidate's subclass)."""
    for base in cls.__mro__:
        if base.__module__.startswith("trustbench.") and "<locals>" not in base.__qualname__:
            return base
    return None


def _trusted_class(name: str) -> type:
    module, _, qualname = name.partition(":")
    if not module.startswith("trustbench."):
        raise WorkerFailed(f"refusing to rebuild {name}: only trustbench classes cross by value")
    value: Any = import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    if not isinstance(value, type):
        raise WorkerFailed(f"{name} is not a class")
    return value


def _public_members(obj: Any) -> dict[str, Any]:
    """How an object crossing by reference is described: plain attributes and method names."""
    attrs: dict[str, Any] = {}
    methods: list[str] = []
    coroutines: list[str] = []
    for name in dir(obj):
        if name.startswith("_"):
            continue
        static = inspect.getattr_static(obj, name, None)
        # A property or a slot holds its value on the instance: read it there.
        value = getattr(obj, name, None) if inspect.isdatadescriptor(static) else static
        if inspect.iscoroutinefunction(value) or inspect.iscoroutinefunction(getattr(obj, name)):
            coroutines.append(name)
        elif callable(value) or isinstance(value, staticmethod | classmethod):
            methods.append(name)
        else:
            try:
                attrs[name] = encode_value(value, None)
            except TypeError:
                continue  # an attribute that cannot cross by value stays on its side
    call = None
    if callable(obj):
        call = (
            "async"
            if inspect.iscoroutinefunction(obj)
            or inspect.iscoroutinefunction(
                getattr(obj, "__call__", None)  # noqa: B004 - the object's own __call__
            )
            else "sync"
        )
    return {"attrs": attrs, "methods": methods, "coroutines": coroutines, "call": call,
            "class": type(obj).__name__}  # fmt: skip


def encode_value(value: Any, export: Any) -> Any:
    """`value` as JSON; `export(obj) -> id` turns other objects into references (None: refuse)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple | set | frozenset):
        return [encode_value(v, export) for v in value]
    if isinstance(value, dict):
        return {"$": "dict", "items": [[encode_value(k, export), encode_value(v, export)]
                                       for k, v in value.items()]}  # fmt: skip
    if isinstance(value, datetime | date):
        return {"$": type(value).__name__, "iso": value.isoformat()}
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, bytes):
        return {"$": "bytes", "base64": base64.b64encode(value).decode()}
    base = _trusted_base(type(value))
    if base is not None and isinstance(value, enum.Enum):
        return {"$": "enum", "type": _type_name(base), "value": value.value}
    dump = getattr(value, "model_dump", None)
    if base is not None and callable(dump):
        return {"$": "model", "type": _type_name(base), "data": dump(mode="json")}
    if base is not None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: encode_value(getattr(value, f.name), export)
                  for f in dataclasses.fields(value) if f.init}  # fmt: skip
        return {"$": "dataclass", "type": _type_name(base), "fields": fields}
    if export is None:
        raise TypeError(f"{type(value).__name__} cannot cross by value")
    return {"$": "ref", "id": export(value), **_public_members(value)}


# ------------------------------------------------------------------------------------------------
# One side of the pipe: the objects it exported, the proxies of the other side's, the exchange.


class RemoteObject:
    """An object living on the other side of the pipe (attributes copied, methods called there)."""

    _endpoint: Endpoint
    _ref: int


def _remote_method(name: str | None, *, coroutine: bool) -> Any:
    if coroutine:

        async def call_async(self: RemoteObject, *args: Any, **kwargs: Any) -> Any:
            endpoint = self._endpoint
            if endpoint.awaits:  # the worker: the candidate waits for the harness, blocking
                return endpoint.call(self._ref, name, args, kwargs)
            return await endpoint.acall(self._ref, name, args, kwargs)

        return call_async

    def call(self: RemoteObject, *args: Any, **kwargs: Any) -> Any:
        return self._endpoint.call(self._ref, name, args, kwargs)

    return call


class Endpoint:
    """One side of a worker's pipe pair: exported objects, remote proxies and the exchange."""

    def __init__(self, inbox: IO[bytes], outbox: IO[bytes], *, trusts_peer: bool) -> None:
        self.inbox = inbox
        self.outbox = outbox
        self.trusts_peer = trusts_peer
        """The worker trusts the harness's exceptions; the harness rebuilds only its own."""
        self.exported: dict[int, Any] = {}
        self.next_id = 0
        self.dropped: list[int] = []
        self.raised: dict[int, BaseException] = {}
        """This side's exceptions sent to the other side, by id: one that comes back out of the
        other side's code (a `ResponseLost` through a boundary) is raised again as itself."""
        self.lock = threading.RLock()
        self.broken = False
        """A call was abandoned: the worker is stopped and this endpoint serves no more."""
        self.on_abandon: Any = None
        """What stops the worker (set by `CandidateWorker`)."""
        self._thread: Any = None
        self.awaits = False
        """Whether this side may await a coroutine it was asked to run (the worker's side)."""
        self._loop: Any = None

    # -- the codec with this side's references -------------------------------------------------

    def export(self, obj: Any) -> int:
        self.next_id += 1
        self.exported[self.next_id] = obj
        return self.next_id

    def encode(self, value: Any) -> Any:
        return encode_value(value, self.export)

    def decode(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.decode(v) for v in value]
        if not isinstance(value, dict):
            return value
        kind = value.get("$")
        if kind == "dict":
            return {self.decode(k): self.decode(v) for k, v in value["items"]}
        if kind in ("datetime", "date"):
            return (datetime if kind == "datetime" else date).fromisoformat(value["iso"])
        if kind == "ref":
            return self.proxy(value)
        if kind == "bytes":
            return base64.b64decode(value["base64"])
        cls = _trusted_class(str(value["type"]))
        if kind == "enum":
            return cls(value["value"])
        if kind == "model":
            return cls.model_validate(value["data"])  # type: ignore[attr-defined]
        fields = {k: self.decode(v) for k, v in value["fields"].items()}
        return cls(**fields)

    def proxy(self, description: dict[str, Any]) -> RemoteObject:
        namespace: dict[str, Any] = {k: self.decode(v) for k, v in description["attrs"].items()}
        namespace |= {m: _remote_method(m, coroutine=False) for m in description["methods"]}
        namespace |= {m: _remote_method(m, coroutine=True) for m in description["coroutines"]}
        if description["call"]:
            namespace["__call__"] = _remote_method(None, coroutine=description["call"] == "async")
        cls = type(str(description["class"]), (RemoteObject,), namespace)
        obj = cls()
        obj._endpoint, obj._ref = self, int(description["id"])
        weakref.finalize(obj, self.dropped.append, obj._ref)
        return obj

    # -- the exchange ---------------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        if self.broken:
            raise WorkerFailed("the candidate's worker was stopped after a call timed out")
        self.outbox.write(json.dumps(message).encode() + b"\n")
        self.outbox.flush()

    def receive(self) -> dict[str, Any]:
        line = self.inbox.readline()
        if not line:
            raise WorkerFailed("the other side of the sandbox pipe closed")
        return json.loads(line)

    def call(
        self, ref: int, method: str | None, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> Any:
        """Call `method` (None: the object itself) of the remote object `ref` and wait for it.

        The other side's callbacks are served while waiting; an exception a callback raised that
        comes back out of the call is re-raised as itself.
        """
        with self.lock:
            self._send_call(ref, method, args, kwargs)
            while True:
                message = self.receive()
                if "op" not in message:
                    return self._answer(message)
                self.serve(message)

    def _answer(self, message: dict[str, Any]) -> Any:
        if "ok" in message:
            return self.decode(message["ok"])
        failure = message["raise"]
        ours = self.raised.pop(int(failure.get("passes") or 0), None)
        if ours is not None:  # our own exception, passed through the other side's code
            raise ours
        error: Exception = CandidateRaised(
            f"{failure['type'].split(':')[-1]}: {failure['message']}"[:2000]
        )
        if self.trusts_peer:  # the worker rebuilds the harness's exception for the candidate
            error = _rebuilt_exception(failure["type"], failure["message"]) or error
        error.__dict__["_sandbox_passes"] = failure.get("id")
        raise error

    async def acall(
        self, ref: int, method: str | None, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> Any:
        """`call` from the harness's event loop, without blocking it.

        The exchange runs on this endpoint's one thread, so a trial timeout (a cancellation)
        still fires while the candidate computes or hangs; a callback's coroutine (an agent's
        tool) is run on the loop. A cancelled call cannot be taken back from the worker: the
        worker is stopped (`abandon`) and the next use of the candidate starts a fresh one.
        """
        import asyncio

        loop = asyncio.get_running_loop()
        if self._thread is None:
            from concurrent.futures import ThreadPoolExecutor

            self._thread = ThreadPoolExecutor(1, thread_name_prefix="trustbench-sandbox")
        try:
            return await loop.run_in_executor(
                self._thread, self._call_from_thread, loop, ref, method, args, kwargs
            )
        except asyncio.CancelledError:
            self.abandon()
            raise

    def _call_from_thread(
        self, loop: Any, ref: int, method: str | None, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> Any:
        import asyncio

        with self.lock:
            self._send_call(ref, method, args, kwargs)
            while True:
                message = self.receive()
                if "op" not in message:
                    return self._answer(message)
                try:
                    result = self._invoke(message)
                    if inspect.isawaitable(result):
                        result = asyncio.run_coroutine_threadsafe(_awaited(result), loop).result()
                    reply = {"ok": self.encode(result)}
                except Exception as error:
                    reply = self._failure(error)
                self.send(reply)

    def abandon(self) -> None:
        """Give up on this worker (a call was cancelled mid-flight): stop it."""
        self.broken = True
        if self.on_abandon is not None:
            self.on_abandon()

    def _send_call(
        self, ref: int, method: str | None, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> None:
        drops, self.dropped = self.dropped, []
        self.send({"op": "call", "ref": ref, "method": method, "args": self.encode(list(args)),
                   "kwargs": self.encode(kwargs), "drop": drops})  # fmt: skip

    def _invoke(self, message: dict[str, Any]) -> Any:
        for ref in message.get("drop", ()):
            self.exported.pop(int(ref), None)
        target = self.exported[int(message["ref"])]
        method = message["method"]
        fn = target if method is None else getattr(target, method)
        return fn(*self.decode(message["args"]), **self.decode(message["kwargs"]))

    def _failure(self, error: Exception) -> dict[str, Any]:
        passes = _passed_through(error)
        self.next_id += 1
        self.raised = {**dict(list(self.raised.items())[-7:]), self.next_id: error}
        return {"raise": {"type": _type_name(type(error)), "message": str(error)[:2000],
                          "id": self.next_id, "passes": passes}}  # fmt: skip

    def serve(self, message: dict[str, Any]) -> None:
        """Run one call of the other side on an exported object and send its answer."""
        try:
            result = self._invoke(message)
            if inspect.isawaitable(result):
                result = self._await(result)
            reply: dict[str, Any] = {"ok": self.encode(result)}
        except Exception as error:
            reply = self._failure(error)
        self.send(reply)

    def _await(self, awaitable: Any) -> Any:
        if not self.awaits:
            raise WorkerFailed("a coroutine callback cannot be awaited on this side")
        if self._loop is None:
            import asyncio  # only a candidate with coroutines pays for it

            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(awaitable)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _passed_through(error: BaseException) -> int | None:
    """The other side's id of `error` (or of the exception it was raised from), if it has one."""
    seen: BaseException | None = error
    while seen is not None:
        passes = seen.__dict__.get("_sandbox_passes") if hasattr(seen, "__dict__") else None
        if passes is not None:
            return int(passes)
        seen = seen.__cause__ or seen.__context__
    return None


def _rebuilt_exception(name: str, message: str) -> Exception | None:
    """The harness's exception `name` rebuilt in the worker (None when it cannot be).

    Built-in exceptions and trustbench's are rebuilt, so a candidate can catch what the
    in-process path would raise to it (a `ResponseLost`, a `KeyError`).
    """
    try:
        if name.startswith("builtins:"):
            cls = getattr(builtins, name.partition(":")[2])
        else:
            cls = _trusted_class(name)
        error = cls(message)
    except Exception:  # a class needing other arguments: the candidate sees CandidateRaised
        return None
    return error if isinstance(error, Exception) else None


# ------------------------------------------------------------------------------------------------
# The harness side: one worker process per candidate.


def trustbench_package() -> str:
    """The trustbench package folder (its code is readable by workers, its data is not)."""
    import trustbench

    return str(Path(trustbench.__file__).resolve().parent)


def interpreter_paths() -> list[str]:
    """What any worker reads to run Python: system libraries, the interpreter and its packages."""
    import sysconfig

    stdlib = [sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    # A bytecode cache kept apart (`PYTHONPYCACHEPREFIX`) holds only compiled modules.
    cache = [sys.pycache_prefix] if sys.pycache_prefix else []
    return [*SYSTEM_READ, sys.prefix, sys.base_prefix, sys.exec_prefix, *stdlib, *cache]


def harness_secrets() -> list[str]:
    """The held-out key named by `$TRUSTBENCH_HELDOUT_KEY`, which no worker may read anywhere.

    The variable may also hold the key itself, which never reaches a worker: the workers'
    environment has no `TRUSTBENCH_*` variable. The callers add the rest (the cache, the run
    folder, the corpus).
    """
    key = os.environ.get("TRUSTBENCH_HELDOUT_KEY", "").strip()
    return [key] if key and "\n" not in key and Path(key).exists() else []


def probe_paths(hidden: Sequence[str] = ()) -> list[str]:
    """The secrets a worker tries to read once confined.

    The harness's own (`harness_secrets`), `hidden`, and a sample of the trustbench package's
    data: each data folder's first file and every MANIFEST (corpora, labels, reference reviews).
    """
    sample: list[str] = []
    seen: set[str] = set()
    for path in sorted(package_data(trustbench_package())):
        folder = os.path.dirname(path)
        if folder not in seen or os.path.basename(path) == "MANIFEST.json":
            sample.append(path)
            seen.add(folder)
    return [*harness_secrets(), *hidden, *sample]


def endpoint_ports(endpoints: Sequence[str]) -> list[int] | None:
    """The TCP ports of declared endpoints (`host:port` or URLs); None when none is declared.

    Raises:
        ValueError: an endpoint that names no port (and no http/https scheme).
    """
    from urllib.parse import urlsplit

    ports: list[int] = []
    for endpoint in endpoints:
        parts = urlsplit(endpoint if "//" in endpoint else f"//{endpoint}")
        try:
            port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
        except ValueError:
            port = None
        if port is None:
            raise ValueError(f"endpoint {endpoint!r} names no port")
        ports.append(port)
    return ports or None


def module_paths(entry: str) -> list[str]:
    """The folder (or file) of the entry's top-level module and its parent, not importing it.

    `find_spec` of a top-level name locates it without running it; its folder is where the
    import system finds it, so the worker may read that folder (less the hidden paths).
    """
    from importlib.util import find_spec

    from trustbench.errors import InputError

    top = entry.partition(":")[0].split(".")[0]
    if str(Path.cwd()) not in sys.path:  # as `import_object` does: the current folder imports
        sys.path.insert(0, str(Path.cwd()))
    spec = find_spec(top)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if spec is not None and not locations and spec.origin not in (None, "built-in", "frozen"):
        locations = [str(spec.origin)]
    if not locations:
        raise InputError(f"cannot find module {top!r} of {entry}", location=entry)
    # Only the folder the import system finds the module in: never the import roots above it
    # (the harness's working folder is one, and an outside attacker read the owner's files
    # there: keys, other runs' ledgers, a split's clear held-out cases). A candidate module that
    # imports from a folder above its own must be given as that folder's package.
    folders = [Path(p).resolve().parent for p in locations]
    return list(dict.fromkeys(map(str, folders)))


RUNTIME_VARIABLES: tuple[str, ...] = (
    # Finding programs and the native libraries a non-system interpreter links against.
    "PATH", "LD_LIBRARY_PATH",
    # Locale, time zone and terminal: how text, dates and output are rendered.
    "LANG", "LANGUAGE", "LC_*", "TZ", "TERM",
    # The interpreter's own modes (bytecode kept apart, hashing, text encoding, warnings).
    "PYTHONPYCACHEPREFIX", "PYTHONHASHSEED", "PYTHONUTF8", "PYTHONIOENCODING", "PYTHONWARNINGS",
    # Thread pools of the numeric libraries: a model adapter on a shared machine sized as the
    # operator sized the harness (torch's default, every core, was 7x slower on 2 busy cores).
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS", "TOKENIZERS_PARALLELISM",
    # Which accelerator a local model may use, and how its memory is allocated.
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "PYTORCH_CUDA_ALLOC_CONF",
    # Hugging Face libraries told to stay offline (a sandboxed worker has no network anyway).
    "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE",
)  # fmt: skip
"""The harness's environment variables a worker inherits (`fnmatch` patterns): nothing else.

Candidates never share the harness's rights, and an environment is one of them: the operator's
shell holds every candidate's API key, cloud credentials and tokens, which a candidate could put
in its replies (stored in the ledger and the report) or send to an endpoint it declared. So a
worker gets only what configures the runtime and carries no secret (listed by kind above), its
own homes and import path (`worker_environment`), and the one variable its candidate declares
(`api_key_env`, `SandboxPlan.variables`). Proxies are left out (a proxy URL may hold a
password), and so is every `TRUSTBENCH_*` variable (the held-out key's path or the key itself).
"""


def worker_environment(
    folder: str, roots: Sequence[str], variables: Sequence[str] = ()
) -> dict[str, str]:
    """A worker's environment: the runtime's variables, `variables`, homes in its own folder.

    `variables` are the names its candidate declared (`SandboxPlan.variables`); a declared name
    that is unset here is left out, and a `TRUSTBENCH_*` name is never passed.
    """
    env = {
        name: value
        for name, value in os.environ.items()
        if any(fnmatchcase(name, pattern) for pattern in RUNTIME_VARIABLES)
        or (name in variables and not name.startswith("TRUSTBENCH"))
    }
    env.update(
        HOME=folder, TMPDIR=folder, TEMP=folder, TMP=folder, PWD=folder, XDG_CACHE_HOME=folder,
        TRUSTBENCH_CACHE=folder, PYTHONPATH=os.pathsep.join(roots), PYTHONDONTWRITEBYTECODE="1",
    )  # fmt: skip
    return env


@dataclasses.dataclass(frozen=True)
class SandboxPlan:
    """What a worker may read, must not read, and may connect to."""

    read: list[str]
    """Readable paths (the hidden ones carved out)."""
    roots: list[str]
    """Import roots (its PYTHONPATH): the trustbench package's parent and the entry's folder."""
    hidden: list[str]
    """Paths it must not read wherever they lie (the trustbench package's data added by the
    worker itself)."""
    ports: list[int] | None = None
    """TCP ports of the declared endpoints; None: no network."""
    variables: list[str] = dataclasses.field(default_factory=list)
    """Names of the harness's environment variables passed to this worker alone, beside
    `RUNTIME_VARIABLES` (its candidate's declared `api_key_env`)."""


def plan_for(
    entry: str,
    hidden: Sequence[str] = (),
    ports: Sequence[int] | None = None,
    variables: Sequence[str] = (),
) -> SandboxPlan:
    """The sandbox of a worker for `entry`: the documented read list, the harness's secrets.

    `variables`: the environment variables its candidate declared (`SandboxPlan.variables`).
    """
    package = trustbench_package()
    roots = [str(Path(package).parent), *module_paths(entry)]
    return SandboxPlan(
        read=list(dict.fromkeys([*interpreter_paths(), package, *roots])),
        roots=list(dict.fromkeys(roots)),
        hidden=[*harness_secrets(), *hidden],
        ports=None if ports is None else list(ports),
        variables=list(variables),
    )


class CandidateWorker:
    """One sandboxed worker process holding one candidate's entry (started on first use).

    Args:
        entry: The candidate's `module:attr`.
        plan: What the worker may read (`plan_for`).
        probe: Known secret paths the worker tries to read once confined (`reachable`).
        fallback: Use the audit-hook fallback instead of the kernel sandbox (tests only).
    """

    def __init__(
        self,
        entry: str,
        plan: SandboxPlan,
        probe: Sequence[str] = (),
        *,
        scan_prefixes: Sequence[str] = (),
        fallback: bool = False,
    ) -> None:
        self.entry = entry
        self.plan = plan
        self.probe = list(probe)
        self.scan_prefixes = list(scan_prefixes)
        """Text that marks a secret file (a held-out key's prefix): the worker looks for readable
        files starting with it under its import roots."""
        self.fallback = fallback
        self.sandbox: str | None = None
        """The mode it runs under, e.g. "landlock ABI 7 + ipc/net namespaces"."""
        self.reached: list[str] = []
        """The probed secret paths it could read (empty where the sandbox holds)."""
        self._endpoint: Endpoint | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._folder: str | None = None
        self._lock = threading.Lock()

    def start(self) -> Endpoint:
        """Start the worker (once) and return its endpoint.

        Raises:
            WorkerFailed: the worker could not confine itself or import the entry.
        """
        with self._lock:
            if self._endpoint is not None and self._endpoint.broken:
                self._stop()  # a call timed out in it: start a fresh one
            if self._endpoint is None:
                self._endpoint = self._start()
                self._endpoint.on_abandon = self._kill
            return self._endpoint

    def _kill(self) -> None:
        """Stop the process at once (a call in flight was abandoned); restarted on next use."""
        if self._process is not None:
            self._process.kill()

    def _start(self, *, import_entry: bool = True) -> Endpoint:
        self._folder = tempfile.mkdtemp(prefix="trustbench-sandbox-")
        self._process = subprocess.Popen(
            [sys.executable, "-s", "-m", "trustbench.sandbox._rpc"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=self._folder, close_fds=True,
            env=worker_environment(self._folder, self.plan.roots, self.plan.variables),
        )  # fmt: skip
        assert self._process.stdin is not None and self._process.stdout is not None
        endpoint = Endpoint(self._process.stdout, self._process.stdin, trusts_peer=False)
        endpoint.send({
            "entry": self.entry if import_entry else None, "read": self.plan.read,
            "hidden": self.plan.hidden, "ports": self.plan.ports, "workdir": self._folder,
            "probe": self.probe, "scan_roots": self.plan.roots,
            "scan_prefixes": self.scan_prefixes, "fallback": self.fallback,
        })  # fmt: skip
        try:
            hello = endpoint.receive()
        except WorkerFailed:
            self._stop()
            raise WorkerFailed(f"the sandbox worker of {self.entry} exited at start") from None
        if "error" in hello:
            self._stop()
            raise WorkerFailed(str(hello["error"]))
        self.sandbox = str(hello["ok"]["sandbox"])
        self.reached = [str(p) for p in hello["ok"]["reachable"]]
        return endpoint

    def reach(self) -> list[str]:
        """What a worker confined as this candidate's could read of the probed secrets.

        The worker starts without importing the candidate, answers, and is stopped.
        """
        with self._lock:
            try:
                self._start(import_entry=False)
                return list(self.reached)
            finally:
                self._stop()

    def entry_object(self) -> Any:
        """The candidate's entry object (reference 0 in the worker)."""
        endpoint = self.start()
        entry = endpoint.proxy({"id": 0, **endpoint_description(endpoint)})
        # The entry outlives a restart (a timed-out call stops the worker): it always speaks to
        # the current process.
        type(entry)._endpoint = property(lambda _entry: self.start())  # type: ignore[assignment]
        return entry

    def _stop(self) -> None:
        process, self._process, self._endpoint = self._process, None, None
        if process is not None:
            if process.stdin is not None:
                with contextlib.suppress(OSError):  # a killed worker's pipe may be broken
                    process.stdin.close()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def close(self) -> None:
        """Stop the worker and delete its folder."""
        with self._lock:
            self._stop()

    def __del__(self) -> None:
        try:
            self._stop()
        except Exception:  # interpreter shutdown: nothing left to clean
            return


def endpoint_description(endpoint: Endpoint) -> dict[str, Any]:
    """The entry object's description, asked of the worker."""
    return dict(json.loads(endpoint.call(0, "__describe__", (), {})))


# ------------------------------------------------------------------------------------------------
# The worker side.


def _confined(config: dict[str, Any]) -> tuple[str, list[str]]:
    """Confine this process as configured; (mode, reachable probed paths)."""
    package = trustbench_package()
    hidden = [*config["hidden"], *package_data(package)]
    rules = read_rules(config["read"], hidden)
    write = [config["workdir"]]
    if config.get("fallback"):
        mode = install_audit_hook(rules, write)
    else:
        ports = config.get("ports")
        mode = confine(config["read"], write, hidden, None if ports is None else list(ports))
    found = files_starting_with(config.get("scan_roots", []), config.get("scan_prefixes", []))
    return mode, [*reachable(config.get("probe", [])), *found]


class _Entry:
    """Reference 0: the candidate's entry object, and its description for the harness."""

    def __init__(self, endpoint: Endpoint, target: Any) -> None:
        self.endpoint = endpoint
        self.target = target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.target(*args, **kwargs)

    def __describe__(self) -> str:
        return json.dumps(_public_members(self.target))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


def main() -> None:
    """Configure, confine, probe, import the entry, then serve calls until stdin closes."""
    outbox = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # the candidate's prints must not corrupt the protocol
    endpoint = Endpoint(sys.stdin.buffer, outbox, trusts_peer=True)
    config = json.loads(sys.stdin.buffer.readline())
    os.chdir(config["workdir"])
    try:
        mode, reached = _confined(config)
    except SandboxUnavailable as why:
        endpoint.send({"error": f"the sandbox cannot be set up here: {why}"})
        return
    except Exception as error:  # said, not a silent exit: its stderr is discarded
        endpoint.send({"error": f"the sandbox could not confine the worker: {error!r}"[:2000]})
        return
    if config["entry"] is None:  # a probe of what the sandbox reaches, no candidate
        endpoint.send({"ok": {"sandbox": mode, "reachable": reached, "pid": os.getpid()}})
        return
    from trustbench._imports import import_object

    try:
        target = import_object(config["entry"], what="candidate entry")
    except Exception as error:
        endpoint.send({"error": f"{type(error).__name__}: {error}"[:2000]})
        return
    endpoint.exported[0] = _Entry(endpoint, target)
    endpoint.awaits = True
    endpoint.send({"ok": {"sandbox": mode, "reachable": reached, "pid": os.getpid()}})
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return
        endpoint.serve(json.loads(line))


if __name__ == "__main__":
    main()
