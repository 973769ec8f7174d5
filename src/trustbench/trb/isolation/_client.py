"""The harness side of adapter isolation: a worker per candidate and an adapter that talks to it.

`AdapterWorker` runs the candidate's adapters in the sandbox's one worker
(`trustbench.sandbox.CandidateWorker`: a fresh empty folder, an allow-listed environment, the
documented read list of `plan_for` plus the declared `adapter_read_paths`); its entry is
`_worker.serve`, which imports the adapter's factory once confined and answers the harness's
requests (the trials of one candidate share its worker; each trial builds a fresh adapter there).
A worker that dies is started again for the next trial; the trial it died in fails and is scored
as its measures' worst case.

`IsolatedAdapter` is what the measures see: `emit_r`, `act`, `act_many`, `emit_many`, `seed`,
and `use_encoding` when the adapter has it. It has no white box (Track 2 is "not run" for it)
and no `act_without_r` (the harness builds the comparison arms itself). Built for a trace of a
world with its own slots (`AdapterWorker.adapter(world)`), it exchanges `SlotContext` and
`SlotReport` instead of the corridor's types, and checks each report against the world's slot
schema here, in the harness: a report outside it is the adapter's invalid answer (`AdapterFailed`,
recorded and counted as missing), never a report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trustbench.errors import InputError
from trustbench.sandbox import CandidateRaised, CandidateWorker, SandboxPlan, WorkerFailed, plan_for
from trustbench.trb.adapter._protocol import AdapterTier, SelfReport, StepContext

if TYPE_CHECKING:
    from trustbench.trb.world import SlotContext, SlotReport, SlotWorld

SESSION_ENTRY = "trustbench.trb.isolation._worker:serve"
"""What the sandbox worker imports: it builds the session that imports the adapter's factory."""


class AdapterFailed(Exception):
    """A hook raised in the worker, or the worker died (the message says which)."""


def adapter_plan(
    target: str,
    extra: Sequence[str] = (),
    *,
    hidden: Sequence[str] = (),
    ports: Sequence[int] | None = None,
    variables: Sequence[str] = (),
) -> SandboxPlan:
    """The sandbox of a worker for the adapter factory `target`: `plan_for`'s, plus `extra`.

    `extra` is the track's `adapter_read_paths` (e.g. local model weights); `variables` the
    environment variable its candidate declared (`api_key_env`), passed to this worker alone.
    """
    if ":" not in target:
        raise InputError(f"expected MODULE:FACTORY, got {target!r}", location=target)
    plan = plan_for(target, hidden=hidden, ports=ports, variables=variables)
    return dataclasses.replace(plan, read=list(dict.fromkeys([*plan.read, *extra])))


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
    """One sandboxed worker process holding a candidate's adapters (started on first use).

    Args:
        target: The adapter's `MODULE:FACTORY`.
        plan: What the worker may read, must not read and may connect to (`adapter_plan`).
        fallback: The audit-hook fallback instead of the kernel sandbox (tests of it, and a
            candidate with `isolation = "none"` on a machine without the sandbox).
    """

    def __init__(self, target: str, plan: SandboxPlan, *, fallback: bool = False) -> None:
        self.target = target
        self._worker = CandidateWorker(SESSION_ENTRY, plan, fallback=fallback)
        self._session: Any = None
        self._lock = threading.Lock()

    @property
    def sandbox(self) -> str | None:
        """The mode the worker runs under (None until it has started)."""
        return self._worker.sandbox

    def request(self, operation: str, *arguments: Any) -> Any:
        """Call the session's `operation` in the worker (starting the worker if needed).

        Raises:
            AdapterFailed: the hook or the factory raised, the sandbox cannot be set up, or the
                worker died (it is started again on the next request).
        """
        with self._lock:
            try:
                if self._session is None:
                    self._session = self._worker.entry_object()(self.target)
                return getattr(self._session, operation)(*arguments)
            except CandidateRaised as error:
                raise AdapterFailed(str(error)) from None
            except (WorkerFailed, OSError) as error:  # OSError: a write to a dead worker's pipe
                self._stop()
                raise AdapterFailed(f"the adapter worker of {self.target}: {error}") from None

    def _stop(self) -> None:
        self._session = None
        self._worker.close()

    def close(self) -> None:
        """Stop the worker and delete its folder."""
        with self._lock:
            self._stop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to clean
            self._stop()

    def adapter(self, world: SlotWorld | None = None) -> IsolatedAdapter:
        """A fresh adapter built by the factory inside the worker.

        `world`: the world with its own slots of the trace it acts on, which the worker must
        find itself (`_worker._slot_world`: it raises AdapterFailed naming why when it cannot).
        """
        if world is None:
            return IsolatedAdapter(self, self.request("new"))
        from trustbench.trb.world import declaration_sha256

        declared = {"id": world.declaration.world_id,
                    "sha256": declaration_sha256(world.declaration)}  # fmt: skip
        return IsolatedAdapter(self, self.request("new", declared), world)

    def conformance(self, n_traces: int, slot_world: bool = False) -> list[dict[str, Any]]:
        """The conformance kit's results, run inside the worker (sandboxed).

        `slot_world`: the corpus is of a world with its own slots (`check_slot_adapter`).
        """
        return list(self.request("conformance", n_traces, slot_world))


def _decode(answer: dict[str, Any], world: SlotWorld | None = None) -> Any:
    """A hook's answer: a report (checked against `world`'s slot schema there), else its value.

    Raises:
        AdapterFailed: the hook raised, or its report fits neither the report type nor the
            slot schema (an invalid answer, never a report).
    """
    if "error" in answer:
        raise AdapterFailed(str(answer["error"]))
    if "report" in answer:
        return _report(answer["report"], world)
    return answer.get("value", answer.get("invalid"))


def _report(raw: Any, world: SlotWorld | None) -> SelfReport | SlotReport:
    """The reported r as the corridor's `SelfReport` or, in `world`, a schema-valid `SlotReport`.

    Raises:
        AdapterFailed: a report outside the type or the world's slot schema, naming the slot.
    """
    from pydantic import ValidationError

    try:
        if world is None:
            return SelfReport.model_validate(raw)
        from trustbench.trb.world import SlotReport

        report = SlotReport.model_validate(raw)
    except ValidationError as error:
        raise AdapterFailed(f"invalid report: {error.errors()[0]['msg']}") from None
    problems = world.report_problems(report)
    if problems:
        raise AdapterFailed(
            f"invalid report in world {world.declaration.world_id}: {'; '.join(problems)}"
        )
    return report


def _decode_soft(answer: dict[str, Any], world: SlotWorld | None = None) -> Any:
    try:
        return _decode(answer, world)
    except Exception:  # a failed item of a batch: missing, counted by the measure
        return None


class IsolatedAdapter:
    """An adapter living in an `AdapterWorker`: the two hooks, batched forms and seed."""

    def __init__(
        self, worker: AdapterWorker, info: dict[str, Any], world: SlotWorld | None = None
    ) -> None:
        self._worker = worker
        self._world = world
        """The world with its own slots it acts in (its answers are checked against it)."""
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
        return self._worker.request("call", {"handle": self._handle, "hook": hook, **fields})

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

    def emit_r(self, context: StepContext | SlotContext) -> Any:
        """`emit_r` in the worker."""
        answer = self._call("emit_r", contexts=[context.model_dump(mode="json")])[0]
        return _decode(answer, self._world)

    def act(
        self, context: StepContext | SlotContext, r_override: SelfReport | SlotReport | None = None
    ) -> Any:
        """`act` in the worker (its distribution is checked by the measures, over the K actions)."""
        override = None if r_override is None else r_override.model_dump(mode="json")
        answer = self._call("act", contexts=[context.model_dump(mode="json")], overrides=[override])
        return _decode(answer[0], self._world)

    def emit_many(self, contexts: Sequence[StepContext | SlotContext]) -> list[Any]:
        """`emit_r` over many contexts in one exchange (a failed item is None)."""
        answers = self._call("emit_r", contexts=[c.model_dump(mode="json") for c in contexts])
        return [_decode_soft(a, self._world) for a in answers]

    def act_many(
        self,
        contexts: Sequence[StepContext | SlotContext],
        overrides: Sequence[SelfReport | SlotReport | None],
    ) -> list[Any]:
        """`act` over many contexts in one exchange (a failed item is None: invalid)."""
        answers = self._call(
            "act",
            contexts=[c.model_dump(mode="json") for c in contexts],
            overrides=[None if r is None else r.model_dump(mode="json") for r in overrides],
        )
        return [_decode_soft(a, self._world) for a in answers]

    def close(self) -> None:
        """Drop this adapter in the worker (the worker stays for the candidate's next trial)."""
        with contextlib.suppress(AdapterFailed):
            self._worker.request("close", self._handle)
