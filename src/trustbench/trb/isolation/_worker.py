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

import ctypes
import hashlib
import hmac
import json
import os
import struct
import sys
from collections.abc import Callable, Iterable
from typing import IO, Any

from trustbench.trb.adapter._protocol import StepContext

# ------------------------------------------------------------------------------------------------
# The fallback sandbox where Landlock is missing: a Python audit hook refusing file access.
#
# `sys.addaudithook` hooks cannot be removed from Python, and every `open`, directory listing,
# `os.chdir` and `subprocess` start passes through them, so an adapter written in Python cannot
# open the corpus, the cache or the run folder. It is weaker than Landlock: native code (ctypes,
# a C extension, a process started with `os.posix_spawn` where not audited) can bypass it. The
# worker records the mode ("python audit hook (bypassable by native code)") so the report names it.

MODE = "python audit hook (bypassable by native code)"
"""The fallback's name, as recorded per candidate."""

_PATH_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "os.chdir", "os.walk", "glob.glob"})
_PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn"})


def _roots(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple(os.path.realpath(p) for p in paths)


def install(read_paths: Iterable[str], write_paths: Iterable[str]) -> str:
    """Refuse, from now on, any file access outside the given paths and any new process."""
    allowed = _roots([*read_paths, *write_paths])

    def inside(path: Any) -> bool:
        if isinstance(path, int):  # an already-open descriptor (os.scandir(fd), fdopen)
            return True
        try:
            real = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in allowed)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in _PROCESS_EVENTS:
            raise PermissionError(f"the TRB adapter sandbox refuses {event}")
        if event in _PATH_EVENTS and args and args[0] is not None and not inside(args[0]):
            raise PermissionError(f"the TRB adapter sandbox refuses {event} of {args[0]!r}")

    sys.addaudithook(hook)
    return MODE


# ------------------------------------------------------------------------------------------------
# A filesystem sandbox for the adapter worker: Linux Landlock through raw system calls.
#
# Why Landlock: it needs no privilege, no setuid helper and no package (bubblewrap needs user
# namespaces, which many containers and CI runners refuse); any Linux kernel since 5.13 has it,
# and once a process restricts itself the restriction cannot be lifted, by it or any child. The
# rules are an allow-list: the worker may read the interpreter, its libraries and the adapter's
# own module folder, and read and write its own empty folder; everything else (the corpus, the
# harness cache, the run folder, the user's home) is refused by the kernel with EACCES.
#
# Where Landlock is missing (another OS, an old kernel, a seccomp profile that blocks the calls)
# `restrict` says so and the worker falls back to a Python audit hook (below), which
# refuses the same opens but can be bypassed by native code: the mode is recorded per candidate.
#
# The constants are the kernel's uapi (`include/uapi/linux/landlock.h`); the system call numbers
# 444-446 are the same on every architecture that has them.

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_ABI1_ALL = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | _TRUNCATE | _IOCTL_DEV
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
"""Rights of a read-only path (execute included: shared libraries are mapped executable)."""


class SandboxUnavailable(Exception):
    """Landlock cannot be applied here (the message says why)."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        value = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(int(value), 0)


def _handled(abi: int) -> int:
    handled = _ABI1_ALL
    if abi >= 2:
        handled |= _REFER
    if abi >= 3:
        handled |= _TRUNCATE
    if abi >= 5:
        handled |= _IOCTL_DEV
    return handled


def _check(value: int, what: str) -> int:
    if value < 0:
        errno = ctypes.get_errno()
        raise SandboxUnavailable(f"landlock {what} failed: {os.strerror(errno)}")
    return value


def restrict(read_paths: Iterable[str], write_paths: Iterable[str]) -> str:
    """Restrict this process (and its future children) to the given paths, for good.

    Args:
        read_paths: Files or folders the process may read (missing ones are skipped).
        write_paths: Folders it may read, write, create and delete in.

    Returns:
        The mode, e.g. "landlock ABI 7" (recorded per candidate).

    Raises:
        SandboxUnavailable: Landlock is missing or refused; nothing was restricted.
    """
    abi = abi_version()
    if abi < 1:
        raise SandboxUnavailable("this kernel has no Landlock (Linux >= 5.13 with it enabled)")
    libc = _libc()
    handled = _handled(abi)
    # struct landlock_ruleset_attr: handled_access_fs, handled_access_net (ABI 4), scoped (ABI 6).
    # The network is not restricted (a user adapter may call its own model's API); signals and
    # abstract unix sockets outside the sandbox are, where the ABI can.
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("=QQQ", handled, 0, scoped) if abi >= 6 else struct.pack("=Q", handled)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    size = ctypes.c_size_t(len(attr))
    ruleset = _check(libc.syscall(_CREATE_RULESET, buffer, size, 0), "ruleset")
    try:
        rules = [(p, READ) for p in read_paths] + [(p, handled) for p in write_paths]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path that does not exist grants nothing
            try:
                allowed = rights & handled
                if not os.path.isdir(path):
                    allowed &= _FILE_RIGHTS
                rule = ctypes.create_string_buffer(struct.pack("=Qi", allowed, fd), 12)
                _check(libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0), "add_rule")
            finally:
                os.close(fd)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(libc.syscall(_RESTRICT_SELF, ruleset, 0), "restrict_self")
    finally:
        os.close(ruleset)
    return f"landlock ABI {abi}"


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
        from trustbench.trb.adapter._protocol import SelfReport, StepContext

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
            from trustbench.trb.proxy._local import SLOT_ENCODINGS

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
            raise SandboxUnavailable("the fallback was asked for")
        mode = restrict(read, write)
    except SandboxUnavailable as why:
        mode = f"{install(read, write)}; landlock not used: {why}"
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
