"""The async runner: runs (or resumes) a frozen experiment into its ledger.

Before anything runs it re-checks the manifest hash, every resolved input and the plan, and the
ledger's chain. Trials of all candidates run interleaved in one seeded random order (so no
candidate systematically meets a different service load), `concurrency` at a time, each from a
fresh context. A trial is finished when its row is in `trials`; a resumed run runs only the
others. An execution killed mid-trial is marked abandoned (its attempts stay, never counted) and
the trial is run again from scratch as the next execution.

Trials run in this process's event loop (`local`) or on Ray workers (`ray`, see
`_ray_executor.py`); both run a trial with `_trial.execute_trial`, and only this process writes
the ledger.
"""

from __future__ import annotations

import gc
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import trustbench
from trustbench.core._context import (
    AdaptiveConcurrency,
    RunServices,
    TokenBucket,
    build_provider,
    check_credentials,
    close_workers,
    endpoint_gates,
    preflight,
    run_secrets,
    start_run_workers,
    stop_reason,
    structured,
)
from trustbench.core._run_folder import (
    RunLock,
    holds_the_whole_plan,
    mark_abandoned,
    remaining_positions,
)
from trustbench.core._track import Track, TrialKey, load_track, track_hook
from trustbench.core._trial import RemoteTrialResult, execute_trial
from trustbench.core.ledger._store import Ledger
from trustbench.core.spec._manifest import (
    Manifest,
    SeededOrder,
    check_inputs,
    handed_out,
    read_manifest,
)
from trustbench.errors import CheckFailed, InputError
from trustbench.providers._http import new_session
from trustbench.providers._redact import secret_values
from trustbench.providers._types import ChatProvider

if TYPE_CHECKING:
    import asyncio


# ------------------------------------------------------------------------------------------------
# Keep the garbage collector's full passes off a run's event loop.
#
# A full (oldest-generation) collection walks every tracked object in the process: every module,
# class, compiled schema and model the run has imported or loaded, which is most of the heap and
# never garbage. In the latency-bound bench one such pass took about 80 ms of the run's start-up,
# and each one during the trials stalls every in-flight trial for as long. `gc.freeze()` moves
# the objects alive when the run starts to a permanent generation that collections skip (the
# CPython documentation suggests it for this); objects made during the run are collected as
# usual. On exit the frozen objects are handed back, so a long-lived caller (a notebook running
# several experiments) collects them again.


@contextmanager
def long_lived_objects_frozen() -> Iterator[None]:
    """Freeze what is alive now for the duration of the block (unless someone else already did).

    A caller that froze objects itself keeps them frozen: this leaves its freeze alone.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


# ------------------------------------------------------------------------------------------------
# Run progress: a rich progress bar on a terminal, plain periodic lines otherwise.


class ProgressReporter(Protocol):
    """Receives run progress; implementations must be cheap (called once per trial)."""

    def start(self, total: int, done: int) -> None:
        """The run starts with `done` of `total` trials already finished."""
        ...

    def update(self, done: int, failed: int, retries: int) -> None:
        """Counts changed."""
        ...

    def close(self) -> None:
        """The run ended."""
        ...


class PlainProgress:
    """One line every `every_s` seconds (and at the end): for logs and CI."""

    def __init__(self, stream: TextIO | None = None, every_s: float = 5.0) -> None:
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self._total = self._done = self._failed = self._retries = 0
        self._last = 0.0
        self._started = 0.0
        self._first_done = 0

    def start(self, total: int, done: int) -> None:
        """Print the starting point."""
        self._total, self._done, self._first_done = total, done, done
        self._started = self._last = time.monotonic()
        self._line()

    def update(self, done: int, failed: int, retries: int) -> None:
        """Print at most one line per `every_s`."""
        self._done, self._failed, self._retries = done, failed, retries
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            self._line()

    def close(self) -> None:
        """Print the final counts."""
        self._line()

    def _line(self) -> None:
        elapsed = time.monotonic() - self._started
        ran = self._done - self._first_done
        eta = ""
        if ran and self._done < self._total:
            eta = f", ETA {elapsed / ran * (self._total - self._done):.0f} s"
        print(
            f"trials {self._done}/{self._total} done, {self._failed} failed, "
            f"{self._retries} transport retries{eta}",
            file=self.stream,
            flush=True,
        )


class RichProgress:
    """A live progress bar (done/total, failed, retries, ETA) on a terminal."""

    def __init__(self) -> None:
        # rich is imported here, for a terminal's bar only: `run --quiet` and plain lines never
        # load it (start-up, issue 35).
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("trials"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("failed {task.fields[failed]} retries {task.fields[retries]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self._task = None

    def start(self, total: int, done: int) -> None:
        """Show the bar."""
        self._progress.start()
        self._task = self._progress.add_task(
            "run", total=total, completed=done, failed=0, retries=0
        )

    def update(self, done: int, failed: int, retries: int) -> None:
        """Move the bar."""
        if self._task is not None:
            self._progress.update(self._task, completed=done, failed=failed, retries=retries)

    def close(self) -> None:
        """Stop the bar."""
        self._progress.stop()


class CountingProgress:
    """Passes progress on to another reporter and keeps the last counts.

    `run` reads them when Ctrl-C stops it, to say how far the run got before it names the resume
    command: the ledger holds every finished trial, so the same command picks up the rest.
    """

    def __init__(self, inner: ProgressReporter) -> None:
        self.inner = inner
        self.total = self.done = self.failed = 0

    def start(self, total: int, done: int) -> None:
        """Keep the plan's size and the finished count, then pass them on."""
        self.total, self.done = total, done
        self.inner.start(total, done)

    def update(self, done: int, failed: int, retries: int) -> None:
        """Keep the counts, then pass them on."""
        self.done, self.failed = done, failed
        self.inner.update(done, failed, retries)

    def close(self) -> None:
        """Pass the end on."""
        self.inner.close()


class NoProgress:
    """Reports nothing (for tests and library use)."""

    def start(self, total: int, done: int) -> None:
        """Ignore."""

    def update(self, done: int, failed: int, retries: int) -> None:
        """Ignore."""

    def close(self) -> None:
        """Ignore."""


def default_progress() -> ProgressReporter:
    """A rich bar when stderr is a terminal, plain lines otherwise."""
    return RichProgress() if sys.stderr.isatty() else PlainProgress()


@dataclass(frozen=True)
class RunSummary:
    """What one `run` invocation did."""

    planned: int
    """Trials in the frozen plan."""
    finished_before: int
    """Trials already finished when this invocation started (resume)."""
    completed: int
    """Trials this invocation finished as completed."""
    failed: int
    """Trials this invocation finished as failed (recorded, still in every denominator)."""
    attempts: int
    """Attempts recorded by this invocation."""
    transport_retries: int
    """Transport retries made by this invocation."""
    abandoned_executions: int
    """Executions of earlier, interrupted invocations marked abandoned now."""
    stopped: dict[str, str] = field(default_factory=dict)
    """Candidate -> why its remaining trials were not run (`retry.stop_after_client_errors`)."""
    notes: tuple[str, ...] = ()
    """What the track's `before_run` hook asked to show (e.g. a held-out set's exposure)."""


RemoteTrial = Callable[[int, TrialKey, int], Awaitable[RemoteTrialResult | None]]
"""Runs a trial elsewhere: `(position, key, execution) -> result`, or None when the trial was
not run because its endpoint had stopped before it began (it stays unrun, as a trial not
handed out)."""

RemoteStop = Callable[[str, str], Awaitable[None]]
"""Stops an endpoint everywhere trials run, saying why: `(endpoint, why)` (every Ray worker's
gate for it)."""


class _Execution:
    """State of one `run` invocation."""

    def __init__(
        self,
        manifest: Manifest,
        track: Track,
        ledger: Ledger,
        providers: dict[str, ChatProvider | None],
        services: RunServices,
        progress: ProgressReporter,
        remote: RemoteTrial | None = None,
        remote_stop: RemoteStop | None = None,
    ) -> None:
        self.manifest = manifest
        self.track = track
        self.ledger = ledger
        self.providers = providers
        self.services = services
        self.progress = progress
        self.remote = remote
        self.remote_stop = remote_stop
        self.next_execution: dict[str, int] = {}
        self.done = self.completed = self.failed = 0
        self.first_errors: dict[str, list[str | None]] = {}
        self.stopped: dict[str, str] = {}
        """Candidate -> why its remaining trials are not run (`stop_after_client_errors`, or a
        server that cannot answer one call alone)."""
        self._watch_unanswered_calls()

    async def run_trial(self, position: int, key: TrialKey) -> None:
        execution = self.next_execution.get(key.trial_id, 1)
        if self.remote is None:
            row = await execute_trial(
                self.track,
                self.manifest,
                self.providers[key.candidate],
                self.services,
                key,
                position,
                execution,
            )
            self.ledger.append("trials", row)
        else:
            # The worker ran the trial and collected its attempts; the driver, the ledger's only
            # writer, commits them with the trial row in one transaction.
            result = await self.remote(position, key, execution)
            if result is None:
                return  # its endpoint stopped before it began: not run
            for change in result.concurrency_changes:
                self.ledger.event("concurrency_changed", change)
            row = result.row
            self.ledger.append_many(
                [("attempts", a) for a in result.attempts] + [("trials", row)],
                family=key.case_id,
            )
            self.services.attempts += len(result.attempts)
            self.services.retries += result.retries
            for endpoint, why in result.stopped_endpoints.items():
                await self._stop_remote_endpoint(endpoint, why)
        self.ledger.anchor()
        self._watch_client_errors(key.candidate, row)
        self.done += 1
        if row["status"] == "completed":
            self.completed += 1
        else:
            self.failed += 1
        self.progress.update(self.done, self.failed, self.services.retries)

    def _watch_unanswered_calls(self) -> None:
        """Stop an endpoint's candidates when its server cannot answer one call alone in time.

        At the call that shows it (`AdaptiveConcurrency.on_stop`), not when a trial ends: no
        trial of theirs is handed out after it, and their gate sends nothing more.
        """
        for gate in self.services.concurrency.values():
            gate.on_stop = lambda gate=gate: self._stop_candidates_of(gate)

    def _stop_candidates_of(self, gate: AdaptiveConcurrency) -> None:
        """Record each candidate of `gate`'s endpoint as stopped, with the gate's reason."""
        why = gate.stop_reason(self.services.timeout_s)
        for candidate, provider in self.providers.items():
            at_gate = provider is not None and provider.endpoint == gate.endpoint
            if why is not None and at_gate and candidate not in self.stopped:
                self._stop(candidate, why)

    async def _stop_remote_endpoint(self, endpoint: str, why: str) -> None:
        """Stop `endpoint`'s candidates after one Ray worker's gate stopped, as a local stop does.

        No trial of theirs is handed out from the moment this is known; every other worker's
        gate is then stopped (its calls in flight cancelled, nothing more sent) before the
        `candidate_stopped` event is recorded, so no call of theirs starts after the event.
        Later trials reporting the same stop change nothing: the event is recorded once.
        """
        candidates = [
            candidate
            for candidate, provider in self.providers.items()
            if provider is not None and provider.endpoint == endpoint
            and candidate not in self.stopped
        ]  # fmt: skip
        if not candidates:
            return
        for candidate in candidates:
            self.stopped[candidate] = why
        if self.remote_stop is not None:
            await self.remote_stop(endpoint, why)
        for candidate in candidates:
            self._stop(candidate, why)

    def _watch_client_errors(self, candidate: str, row: dict[str, Any]) -> None:
        seen = self.first_errors.setdefault(candidate, [])
        limit = self.manifest.spec.retry.stop_after_client_errors
        why = None if candidate in self.stopped else stop_reason(seen, limit, row)
        if why is not None:
            self._stop(candidate, why)

    def _stop(self, candidate: str, why: str) -> None:
        """No trial of `candidate` is handed out from now on; the ledger and the run say why."""
        self.stopped[candidate] = why
        self.ledger.event("candidate_stopped", {"candidate": candidate, "reason": why})


EXECUTORS = ("local", "ray")
"""Where trials run: `local` (this process's event loop) or `ray` (Ray workers; see
`trustbench.core._ray_executor`). The ledger is written by this process either way."""


async def _run(
    run_dir: Path,
    manifest: Manifest,
    progress: ProgressReporter,
    executor: str,
    address: str | None,
    limit: int | None = None,
    preflight: bool = True,
    rerun_cut: bool = False,
) -> RunSummary:
    track, entry = load_track(manifest.track.id)
    if entry != manifest.track.entry:
        raise CheckFailed(
            f"track {manifest.track.id} now loads from {entry}, frozen as {manifest.track.entry}",
            location="manifest.json#/track/entry",
        )
    keys = check_inputs(manifest, track)
    spec = manifest.spec
    check_credentials(spec.candidates)
    pool = None
    if executor == "ray":
        from trustbench.core._ray_executor import RayTrialPool

        pool = RayTrialPool.start(manifest, address)
    try:
        running = _run_into_ledger(
            run_dir, manifest, track, keys, progress, executor, pool, limit, preflight, rerun_cut
        )
        del keys  # held by the run alone, which drops it once the trials are ordered
        return await running
    finally:
        close_workers()  # the candidates' sandbox workers (`_context.build_provider`)
        if pool is not None:
            pool.close()


def _share_rate_limits(spec: Any, providers: dict[str, Any], services: RunServices) -> None:
    """One token bucket per endpoint; candidates sharing an endpoint share the strictest limit."""
    for candidate in spec.candidates:
        provider = providers[candidate.name]
        if candidate.rate_limit_per_s and provider is not None and provider.endpoint:
            current = services.limiters.get(provider.endpoint)
            if current is None or current.rate > candidate.rate_limit_per_s:
                services.limiters[provider.endpoint] = TokenBucket(candidate.rate_limit_per_s)


def _adapt_concurrency(
    spec: Any, providers: dict[str, Any], services: RunServices, ledger: Ledger
) -> None:
    """One adaptive limit of calls in flight per endpoint, the declared concurrency its ceiling.

    Each change is recorded as a `concurrency_changed` event as it happens (record.json shows
    them: `concurrency`).
    """
    gates = endpoint_gates(
        providers.values(),
        spec.concurrency,
        lambda change: ledger.event("concurrency_changed", change),
    )
    for endpoint, gate in gates.items():
        services.concurrency.setdefault(endpoint, gate)


async def _all_finished(workers: list[asyncio.Task[None]]) -> None:
    """Wait for every worker; the first one's error is raised (an interrupt cancels them all)."""
    import asyncio

    await asyncio.gather(*workers)


def _started(
    worker: Callable[[], Coroutine[Any, Any, None]], count: int
) -> list[asyncio.Task[None]]:
    """`count` tasks running `worker`, scheduled on the running loop."""
    import asyncio

    return [asyncio.create_task(worker()) for _ in range(count)]


async def _run_into_ledger(
    run_dir: Path,
    manifest: Manifest,
    track: Track,
    keys: Sequence[TrialKey],
    progress: ProgressReporter,
    executor: str,
    pool: Any,
    limit: int | None = None,
    probe: bool = True,
    rerun_cut: bool = False,
) -> RunSummary:
    spec = manifest.spec
    ledger = Ledger.open(run_dir, manifest.manifest_sha256, accept_cut=True)
    try:
        if (done := _resumed_finished(ledger, run_dir, manifest, track, progress)) is not None:
            return done
        finished = _finished_within_plan(ledger, keys)
        planned, finished_before = len(keys), len(finished)
        # The plan is the one per-trial state a run holds (besides the trials in flight): the
        # seeded order as 4 bytes a trial, and the positions still to run only when resuming
        # (issue 30: memory bounded by the work in flight, not the run).
        order = SeededOrder(keys, spec.order_seed)
        remaining = remaining_positions(ledger, order, finished, rerun_cut=rerun_cut)
        del keys, finished
        # Every refusal (Ray's address, an altered or cut ledger) is behind us and no trial has
        # started: a track that must record each run (a sealed held-out set) records it now, so
        # a refused resume is not counted and a run killed at any point from here has been.
        notes = tuple(track_hook(track, "before_run", manifest, run_dir))
        next_execution, abandoned = mark_abandoned(ledger)
        ledger.start_writer()  # SQLite commits off the event loop from here on
        if limit is not None:
            # The first `limit` remaining trials of the seeded interleaved order: every candidate
            # gets its share, and the rest stay unrun (reported "not run") until a later run.
            remaining = remaining[:limit]
        services = RunServices(
            ledger=ledger,
            policy=spec.retry,
            timeout_s=spec.timeout_s,
            rng=random.Random(spec.order_seed + 1),
            secrets=secret_values(c.api_key_env for c in spec.candidates),
        )
        async with new_session(spec.concurrency) as session:
            # Nothing left to run (a resume of a finished folder) makes no provider: an HTTP one
            # imports aiohttp (about 0.2 s), an in-process one imports the candidate's code.
            providers = _providers(run_dir, manifest, session, ledger, bool(remaining))
            _share_rate_limits(spec, providers, services)
            _adapt_concurrency(spec, providers, services, ledger)
            execution = _Execution(
                manifest,
                track,
                ledger,
                providers,
                services,
                progress,
                remote=pool.run_trial if pool is not None else None,
                remote_stop=pool.stop_endpoint if pool is not None else None,
            )
            execution.next_execution = next_execution
            if pool is not None:  # a lost Ray worker is recorded when it is noticed
                pool.on_worker_lost = lambda loss: ledger.event("worker_lost", loss)
            services.on_retry = lambda: progress.update(
                execution.done, execution.failed, services.retries
            )
            ledger.event(
                "run_started",
                {
                    "pid": os.getpid(),
                    "executor": executor,
                    "trustbench_version": trustbench.__version__,
                    "planned": planned,
                    "finished_before": finished_before,
                    "remaining": len(remaining),
                },
            )
            ledger.anchor(force=True)
            if probe and remaining:  # alone, before any trial: never queued behind one
                await preflight(spec, providers, services, structured(track, spec))
            progress.start(planned, finished_before)
            execution.done = finished_before
            workers_wanted = min(spec.concurrency, len(remaining))
            pending = handed_out(order, remaining, execution.stopped)
            checkpointing = False

            async def worker() -> None:
                nonlocal checkpointing
                for position, key in pending:
                    await execution.run_trial(position, key)
                if not checkpointing:  # every trial is handed out; the last are in flight
                    checkpointing = True
                    ledger.checkpoint_ahead()

            try:
                await _all_finished(_started(worker, workers_wanted))
            finally:
                progress.close()
        summary = RunSummary(
            planned=planned,
            finished_before=finished_before,
            completed=execution.completed,
            failed=execution.failed,
            attempts=services.attempts,
            transport_retries=services.retries,
            abandoned_executions=abandoned,
            stopped=dict(execution.stopped),
            notes=notes,
        )
        # The sign-off: the chain head it closes and the count of finished trials, recorded in
        # the chain and (as the new head) in ledger.head, so a cut after it is detectable.
        ledger.event(
            "run_finished",
            {**summary.__dict__, "finished": ledger.finished_trial_count(), "head": ledger.head},
        )
        ledger.anchor(force=True)
        return summary
    finally:
        ledger.close()


def _providers(
    run_dir: Path, manifest: Manifest, session: Any, ledger: Ledger, needed: bool
) -> dict[str, ChatProvider | None]:
    """Each candidate's provider (None for all when nothing is `needed`), isolation recorded.

    Candidate code runs in one sandbox worker per candidate, which may read neither the run
    folder nor the corpus (`_context.build_provider`, docs/sandbox.md).
    """
    spec = manifest.spec
    if not needed:
        return dict.fromkeys((c.name for c in spec.candidates), None)
    start_run_workers(run_secrets(run_dir, manifest))
    providers: dict[str, ChatProvider | None] = {
        c.name: build_provider(c, session, spec.max_response_bytes, spec=spec)
        for c in spec.candidates
    }
    _record_isolation(ledger, providers)
    return providers


def _record_isolation(ledger: Ledger, providers: dict[str, ChatProvider | None]) -> None:
    """A `candidate_isolation` event: what each candidate's code runs under (for the report)."""
    modes = {
        name: str(getattr(provider, "isolation"))  # noqa: B009 - only in-process providers have it
        for name, provider in providers.items()
        if provider is not None and hasattr(provider, "isolation")
    }
    if modes:
        ledger.event("candidate_isolation", modes)


def _finished_within_plan(ledger: Ledger, keys: Sequence[TrialKey]) -> set[str]:
    """Ids of the trials the ledger holds finished, refusing any outside the frozen plan."""
    finished = ledger.finished_trial_ids()
    # The plan's ids as a set (a string per planned trial, at the run's peak) only when
    # resuming: a fresh run has no finished trial to check against the plan.
    if finished and not finished <= {key.trial_id for key in keys}:
        raise CheckFailed(
            "the ledger holds trials outside the frozen plan", location="ledger.sqlite"
        )
    return finished


def _resumed_finished(
    ledger: Ledger, run_dir: Path, manifest: Manifest, track: Track, progress: ProgressReporter
) -> RunSummary | None:
    """What a resume of a finished run did (nothing); None when the run is not finished.

    Finished: signed off, every planned trial finished, nothing cut. Every trial then has its
    row, so no execution is unfinished (the runner records attempts of planned trials only),
    and there is nothing to run, mark or record: the ledger is left byte for byte as it was,
    and its remembered verification holds for the next resume (issue 56).
    """
    plan = manifest.plan
    if not (
        ledger.cut is None
        and ledger.ends_signed_off()
        and holds_the_whole_plan(ledger, plan.trials, plan.keys_sha256)
    ):
        return None
    # Nothing runs, but a track that guards each run (a sealed held-out set's exposure log)
    # still checks and records it, as on any resume that passed the ledger's checks.
    notes = tuple(track_hook(track, "before_run", manifest, run_dir))
    progress.start(plan.trials, plan.trials)
    progress.close()
    return RunSummary(
        planned=plan.trials, finished_before=plan.trials, completed=0, failed=0, attempts=0,
        transport_retries=0, abandoned_executions=0, notes=notes,
    )  # fmt: skip


def run_experiment(
    run_dir: Path,
    progress: ProgressReporter | None = None,
    *,
    executor: str = "local",
    address: str | None = None,
    limit: int | None = None,
    preflight: bool = True,
    rerun_cut: bool = False,
) -> RunSummary:
    """Run or resume the frozen experiment in `run_dir` (holding the folder's lock).

    Args:
        run_dir: A folder written by `freeze`.
        progress: Where progress goes (default: nowhere).
        executor: `local` (default) or `ray`: run trials on Ray workers, the ledger staying
            single-writer in this process.
        address: With `ray`, the cluster to connect to (`ray.init(address=...)`, e.g.
            `auto` or `ray://head:10001`); None starts a local Ray instance.
        limit: Run at most this many of the remaining trials (seeded order), e.g. for a quick
            check; the others stay unrun and a later run resumes them. None runs all.
        preflight: Probe every API candidate once, alone, before the first trial, and stop
            with the server's message and no trial sent on a failure
            (`trustbench.core._context`). On by default, as
            in `trustbench run` (`--no-preflight` there, `preflight=False` here, skips it);
            a run with no API candidate sends nothing.
        rerun_cut: Re-run the finished trials found cut off the ledger's end (its head
            counted them), recorded in the ledger as that decision; without it such a ledger
            is refused, naming them (`trustbench run --rerun-cut`).

    Returns:
        What this invocation did.

    Raises:
        CheckFailed: when the manifest, an input file, the plan or the ledger chain changed.
        InputError: when the folder is not a run folder or is in use by another run.
    """
    import asyncio

    running = run_experiment_async(
        run_dir, progress, executor=executor, address=address, limit=limit, preflight=preflight,
        rerun_cut=rerun_cut,
    )  # fmt: skip
    return asyncio.run(running)


async def run_experiment_async(
    run_dir: Path,
    progress: ProgressReporter | None = None,
    *,
    executor: str = "local",
    address: str | None = None,
    limit: int | None = None,
    preflight: bool = True,
    rerun_cut: bool = False,
) -> RunSummary:
    """`run_experiment` on the caller's running event loop (same checks, lock and ledger).

    Raises:
        CheckFailed: when the manifest, an input file, the plan or the ledger chain changed.
        InputError: when the folder is not a run folder or is in use by another run.
    """
    manifest = _check_runnable(run_dir, executor, address, limit)
    with RunLock(run_dir), long_lived_objects_frozen():
        return await _run(
            run_dir, manifest, progress or NoProgress(), executor, address, limit, preflight,
            rerun_cut,
        )  # fmt: skip


def _check_runnable(
    run_dir: Path, executor: str, address: str | None, limit: int | None
) -> Manifest:
    """Refuse what cannot run; return the manifest (read and hash-checked once per run)."""
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be at least 1, got {limit}")
    if executor not in EXECUTORS:
        raise InputError(f"unknown executor {executor!r} (known: {', '.join(EXECUTORS)})")
    if address is not None and executor != "ray":
        raise InputError("--address is only meaningful with --executor ray")
    if not (run_dir / "manifest.json").exists():
        raise InputError("no manifest.json: run `trustbench freeze` first", location=str(run_dir))
    manifest = read_manifest(run_dir)
    humans = [c.name for c in manifest.spec.candidates if c.kind == "human"]
    if humans:
        raise InputError(
            f"human candidates {humans} answer in `trustbench rtb human serve`, not in `run`",
            location=str(run_dir / "manifest.json"),
        )
    return manifest
