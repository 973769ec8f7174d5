"""The harness side of adapter isolation: a worker per candidate and an adapter that talks to it.

`AdapterWorker` starts `_worker` in a fresh empty folder with a scrubbed environment and the
allow-list of readable paths (`read_paths`), and exchanges JSON lines with it under a lock (the
trials of one candidate share its worker; each trial builds a fresh adapter there). A worker
that dies is started again for the next trial; the trial it died in fails and is scored as its
measures' worst case.

`IsolatedAdapter` is what the measures see: `emit_r`, `act`, `act_many`, `emit_many`, `seed`,
and `use_encoding` when the adapter has it. It has no white box (Track 2 is "not run" for it)
and no `act_without_r` (the harness builds the comparison arms itself).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from trustbench.errors import InputError
from trustbench.sandbox._confine import SYSTEM_READ
from trustbench.sandbox._rpc import harness_secrets, trustbench_package, worker_environment
from trustbench.trb.adapter._protocol import AdapterTier, SelfReport, StepContext


class AdapterFailed(Exception):
    """A hook raised in the worker, or the worker died (the message says which)."""


def _module_paths(target: str) -> tuple[list[str], list[str]]:
    """(folders to read, folders to list) for the factory's top-level module, not importing it.

    `find_spec` of a top-level name locates it without running it; the module (or package)
    is readable, its parent only listable, so the import system can find it.
    """
    top = target.partition(":")[0].split(".")[0]
    cwd = str(Path.cwd())
    if cwd not in sys.path:  # as `load_factory` does: the current directory is importable
        sys.path.insert(0, cwd)
    spec = find_spec(top)
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        raise InputError(f"cannot find module {top!r} of adapter {target}", location=target)
    locations = list(spec.submodule_search_locations or [])
    read = locations or [spec.origin]
    listed = [str(Path(p).parent) for p in read]
    return read, listed


def read_paths(target: str, extra: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """(readable paths, import roots) of a worker for the adapter factory `target`."""
    import trustbench

    package = str(Path(trustbench.__file__).resolve().parent)
    module_read, module_roots = _module_paths(target)
    stdlib = [sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    read = [*SYSTEM_READ, *prefixes, *stdlib, package, *module_read, *extra]
    roots = [str(Path(package).parent), *module_roots]
    return list(dict.fromkeys(read)), list(dict.fromkeys(roots))


def refuse_overlap(paths: Sequence[str], secret: dict[str, Path]) -> None:
    """Refuse a readable path that holds (or is inside) a grader-only folder.

    Raises:
        InputError: naming the path and the folder it would expose.
    """
    for path in paths:
        real = Path(path).resolve()
        for what, folder in secret.items():
            hidden = folder.resolve()
            if hidden == real or hidden.is_relative_to(real) or real.is_relative_to(hidden):
                raise InputError(
                    f"the adapter worker would read {real}, which holds the {what} ({hidden}); "
                    "move the adapter's module (or the declared read path) out of it",
                    location="adapter isolation",
                )


class AdapterWorker:
    """One sandboxed worker process holding a candidate's adapters (started on first use)."""

    def __init__(
        self,
        target: str,
        read: Sequence[str],
        roots: Sequence[str],
        *,
        fallback: bool = False,
        hidden: Sequence[str] = (),
        ports: Sequence[int] | None = None,
    ) -> None:
        self.target = target
        self.fallback = fallback
        """Only the audit-hook fallback (tests of it, and a candidate with `isolation = "none"`
        on a machine without the sandbox)."""
        self.read = list(read)
        self.roots = list(roots)
        self.hidden = [*harness_secrets(), *hidden]
        """Paths the worker must not read wherever they lie (the corpus, the cache, a key)."""
        self.ports = None if ports is None else list(ports)
        """TCP ports of the candidate's declared endpoints; None: no network."""
        self.sandbox: str | None = None
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._folder: str | None = None

    def _start(self) -> None:
        self._folder = tempfile.mkdtemp(prefix="trb-adapter-")
        self._process = subprocess.Popen(
            [sys.executable, "-s", "-m", "trustbench.trb.isolation._worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=self._folder, env=worker_environment(self._folder, self.roots), close_fds=True,
        )  # fmt: skip
        config = {
            "factory": self.target, "read": self.read + self.roots, "workdir": self._folder,
            "fallback": self.fallback, "hidden": self.hidden, "ports": self.ports,
            "package": trustbench_package(),
        }  # fmt: skip
        hello = self._exchange(config)
        self.sandbox = str(hello["sandbox"])

    def _exchange(self, message: dict[str, Any]) -> Any:
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(json.dumps(message).encode() + b"\n")
            process.stdin.flush()
            line = process.stdout.readline()
        except (BrokenPipeError, OSError):
            line = b""
        if not line:
            self._stop()
            raise AdapterFailed(f"the adapter worker of {self.target} exited")
        reply = json.loads(line)
        if "error" in reply:
            raise AdapterFailed(str(reply["error"]))
        return reply["ok"]

    def request(self, message: dict[str, Any]) -> Any:
        """Send one request and return its answer (starting the worker if needed)."""
        with self._lock:
            if self._process is None:
                self._start()
            return self._exchange(message)

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def close(self) -> None:
        """Stop the worker and delete its folder."""
        with self._lock:
            self._stop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to clean
            self._stop()

    def adapter(self) -> IsolatedAdapter:
        """A fresh adapter built by the factory inside the worker."""
        return IsolatedAdapter(self, self.request({"op": "new"}))

    def conformance(self, n_traces: int) -> list[dict[str, Any]]:
        """The conformance kit's results, run inside the worker (sandboxed)."""
        return list(self.request({"op": "conformance", "n_traces": n_traces}))


def _decode(answer: dict[str, Any]) -> Any:
    if "error" in answer:
        raise AdapterFailed(str(answer["error"]))
    if "report" in answer:
        return SelfReport.model_validate(answer["report"])
    return answer.get("value", answer.get("invalid"))


def _decode_soft(answer: dict[str, Any]) -> Any:
    try:
        return _decode(answer)
    except Exception:  # a failed item of a batch: missing, counted by the measure
        return None


class IsolatedAdapter:
    """An adapter living in an `AdapterWorker`: the two hooks, batched forms and seed."""

    def __init__(self, worker: AdapterWorker, info: dict[str, Any]) -> None:
        self._worker = worker
        self._handle = int(info["handle"])
        self.name = str(info["name"])
        tier = info.get("tier")
        self.tier = AdapterTier(tier) if tier in {t.value for t in AdapterTier} else tier
        self.supports_override = bool(info["supports_override"])
        self.sandbox = worker.sandbox
        if info.get("use_encoding"):
            self.use_encoding = self._use_encoding
        if info.get("continuation_logprob"):  # the open-ended hook, only where it is offered
            self.continuation_logprob = self._continuation_logprob

    def _call(self, hook: str, **fields: Any) -> Any:
        return self._worker.request({"op": "call", "handle": self._handle, "hook": hook, **fields})

    def _use_encoding(self, encoding: Any) -> None:
        self._call("use_encoding", encoding=encoding.name)

    def _continuation_logprob(
        self, context: StepContext, r_override: SelfReport | None, continuation: str
    ) -> float:
        """`continuation_logprob` in the worker (`trb.adapter.LogProbAdapter`).

        Raises:
            AdapterFailed: the adapter's hook raised.
        """
        override = None if r_override is None else r_override.model_dump(mode="json")
        answer = self._call(
            "continuation_logprob", contexts=[context.model_dump(mode="json")],
            overrides=[override], continuation=continuation,
        )  # fmt: skip
        if "error" in answer:
            raise AdapterFailed(str(answer["error"]))
        return float(answer["logprob"])

    def seed(self, value: int) -> None:
        """Seed the adapter in the worker."""
        self._call("seed", value=int(value))

    def emit_r(self, context: StepContext) -> Any:
        """`emit_r` in the worker."""
        return _decode(self._call("emit_r", contexts=[context.model_dump(mode="json")])[0])

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> Any:
        """`act` in the worker."""
        override = None if r_override is None else r_override.model_dump(mode="json")
        answer = self._call("act", contexts=[context.model_dump(mode="json")], overrides=[override])
        return _decode(answer[0])

    def emit_many(self, contexts: Sequence[StepContext]) -> list[Any]:
        """`emit_r` over many contexts in one exchange (a failed item is None)."""
        answers = self._call("emit_r", contexts=[c.model_dump(mode="json") for c in contexts])
        return [_decode_soft(a) for a in answers]

    def act_many(
        self, contexts: Sequence[StepContext], overrides: Sequence[SelfReport | None]
    ) -> list[Any]:
        """`act` over many contexts in one exchange (a failed item is None: invalid)."""
        answers = self._call(
            "act",
            contexts=[c.model_dump(mode="json") for c in contexts],
            overrides=[None if r is None else r.model_dump(mode="json") for r in overrides],
        )
        return [_decode_soft(a) for a in answers]

    def close(self) -> None:
        """Drop this adapter in the worker (the worker stays for the candidate's next trial)."""
        with contextlib.suppress(AdapterFailed):
            self._worker.request({"op": "close", "handle": self._handle})
