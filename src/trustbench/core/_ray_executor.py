"""The Ray executor: trials run on Ray workers, the ledger stays single-writer on the driver.

`trustbench run RUN_DIR --executor ray [--address ADDR]` keeps everything that decides *what*
runs on the driver (manifest and input checks, the seeded order, resume, execution numbers, the
ledger) and sends only the running of each trial to a pool of Ray actors, one per CPU of the
cluster. Each actor loads the track from the frozen manifest's import string, re-hashes every
input the manifest names (so a node that sees different corpus files refuses to run instead of
running something else), and runs trials with exactly the code the local executor uses
(`_trial.execute_trial`). A trial's attempts are collected on the worker and returned with its
trial row; the driver commits them in one transaction.

Differences from the local executor, by design:
- Durability: the local executor commits each attempt when its call finishes; here a trial's
  attempts reach the ledger with the trial. If the driver dies, trials in flight on workers leave
  no rows (instead of attempts marked abandoned) and are run again on resume, as a trial with
  abandoned attempts would be. Nothing finished is ever lost or double-counted.
- A worker that dies (its process killed, its node lost) takes the trials it was running with it:
  each is rescheduled on a fresh worker that replaces the lost one, up to the spec's
  `retry.transport_max_retries` times a trial (a lost worker is infrastructure failing, as a
  dropped connection is), and every loss is a `worker_lost` event in the ledger. A trial lost
  once more than that stops the run with `CheckFailed`; resume runs what remains. A lost worker
  is never recorded as the candidate's failure.
- `--address HOST:PORT` (or `ray://HOST:PORT`) is first reached with a plain TCP connection
  and must answer the HTTP/2 connection preface that every gRPC server (Ray's GCS and its
  client server both are) answers, all within `ADDRESS_TIMEOUT_S`: `ray.init` retries an
  unreachable cluster, or anything else listening there, for many minutes.
- API keys: the values of the candidates' `api_key_env` variables are passed to the worker
  actors as constructor arguments (through Ray's object store, never its job metadata) and set
  in the actor's own process; they are never written to the ledger.
- `rate_limit_per_s` is refused: a token bucket per worker process would not bound the rate the
  endpoint sees. Use the local executor for rate-limited candidates.
- Adaptive concurrency is per worker process, not per cluster: each worker has its own gate per
  endpoint (`AdaptiveConcurrency`), its ceiling the worker's share of `concurrency`, so at its
  lowest the endpoint still sees one call in flight per worker, not one in all. Each change is
  a `concurrency_changed` event naming the `worker`, recorded when that worker hands back its
  next trial. The stop when a server cannot answer one call alone is decided by one worker
  (three calls in a row timed out while its own limit was one; other workers' calls may have
  been in flight beside them, so a server that answers one call in time but not two queued may
  be stopped here where the local executor would finish). The driver then does what a local
  stop does: no trial of the endpoint's candidates is handed out, every worker's gate stops
  (calls in flight cancelled, no retry sent), one `candidate_stopped` event is recorded after
  that with the local message, and the run ends with the local executor's message and exit
  code. A trial already on its way to a worker when the stop came is not run (no row), so it
  stays unrun for a resume, as the trials not handed out do.

Against an existing cluster (`--address auto` on a node of it, or `ray://HEAD:10001`), every node
needs the same Python environment (trustbench and the track's package installed) and the
manifest's corpus and spec folders at the same absolute paths (a shared filesystem), because the
workers re-check the frozen hashes of those files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import socket
import time
from collections.abc import Callable
from typing import Any

from trustbench.core._context import AdaptiveConcurrency, RunServices, endpoint_gates
from trustbench.core._track import TrialKey, track_from_target
from trustbench.core._trial import RemoteTrialResult
from trustbench.core.spec._manifest import Manifest, check_inputs
from trustbench.errors import CheckFailed, InputError
from trustbench.providers._redact import secret_values


class AttemptCollector:
    """Stands in for the ledger inside a worker: keeps one trial's attempt rows in order."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def append(
        self,
        table: str,
        values: dict[str, Any],
        *,
        family: str | None = None,
        request: Any = None,
    ) -> int:
        """Keep an `attempts` row (the only table a trial context writes).

        `family` and `request` are not kept: the driver passes the trial's case when it commits
        the rows, and its ledger packs each request from the row's text.
        """
        if table != "attempts":
            raise ValueError(f"a trial on a worker cannot write the {table} table")
        self.rows.append(values)
        return len(self.rows)


class TrialWorker:
    """Runs trials of one frozen manifest; instantiated as a Ray actor (one per CPU)."""

    def __init__(
        self,
        manifest_data: dict[str, Any],
        worker_index: int,
        credentials: dict[str, str],
        concurrency_share: int,
    ) -> None:
        # The actor owns its process: the candidates' key variables are set here so providers
        # read them exactly as on the driver.
        os.environ.update(credentials)
        self.manifest = Manifest.model_validate(manifest_data)
        self.track = track_from_target(self.manifest.track.entry, self.manifest.track.id)
        check_inputs(self.manifest, self.track)
        self._rng = random.Random(f"{self.manifest.spec.order_seed + 1}/{worker_index}")
        self._worker_index = worker_index
        self._concurrency_share = concurrency_share
        self._session: Any = None
        self._providers: dict[str, Any] | None = None
        self._services: RunServices | None = None
        self._stopped_endpoints: dict[str, str] = {}
        """Endpoint -> why this worker's gate for it stopped (handed back with every trial)."""
        self._concurrency_changes: list[dict[str, Any]] = []
        """Gate changes not yet handed back to the driver."""

    def ready(self) -> bool:
        """Return True once constructed (raises here if the inputs did not check out)."""
        return True

    def _setup(self) -> None:
        # Created on first use, inside the actor's event loop, as aiohttp requires.
        from trustbench.core._context import build_provider
        from trustbench.providers import new_session

        spec = self.manifest.spec
        self._session = new_session(spec.concurrency)
        self._providers = {
            c.name: build_provider(c, self._session, spec.max_response_bytes, spec=spec)
            for c in spec.candidates
        }
        self._services = RunServices(
            ledger=AttemptCollector(),  # type: ignore[arg-type]
            policy=spec.retry,
            timeout_s=spec.timeout_s,
            rng=self._rng,
            secrets=secret_values(c.api_key_env for c in spec.candidates),
            concurrency=self._gates(),
        )

    def _gates(self) -> dict[str, AdaptiveConcurrency]:
        """One adaptive gate per endpoint, this worker's share of `concurrency` its ceiling.

        As the local executor's gates (`_runner._adapt_concurrency`), but per worker process:
        a change is handed back with the next trial (a `concurrency_changed` event naming the
        worker), and a stop is handed back with every later trial, for the driver to stop the
        endpoint's candidates on every worker.
        """
        assert self._providers is not None
        gates = endpoint_gates(
            self._providers.values(),
            self._concurrency_share,
            lambda change: self._concurrency_changes.append(
                {**change, "worker": self._worker_index}
            ),
        )
        for gate in gates.values():
            gate.on_stop = lambda gate=gate: self._note_stop(gate)
        return gates

    def _note_stop(self, gate: AdaptiveConcurrency) -> None:
        """Keep why `gate` stopped, to hand back with every later trial (the driver's cue)."""
        why = gate.stop_reason(self.manifest.spec.timeout_s) or gate.stopped_note(
            self.manifest.spec.timeout_s
        )
        self._stopped_endpoints.setdefault(gate.endpoint, why)

    async def run_trial(
        self, position: int, case_id: str, candidate: str, trial_index: int, execution: int
    ) -> RemoteTrialResult | None:
        """Run one trial and hand back its rows; None (not run) once its endpoint has stopped.

        A trial that reaches this worker after its endpoint stopped (handed out by the driver
        before it learnt of the stop) is not run at all: it sends nothing, leaves no row and
        stays unrun, as the local executor leaves the trials it no longer hands out.
        """
        from trustbench.core._trial import execute_trial

        if self._providers is None:
            self._setup()
        assert self._providers is not None and self._services is not None
        if self._providers[candidate].endpoint in self._stopped_endpoints:
            return None
        collector = AttemptCollector()
        services = dataclasses.replace(self._services, ledger=collector, attempts=0, retries=0)
        key = TrialKey(case_id, candidate, trial_index)
        row = await execute_trial(
            self.track,
            self.manifest,
            self._providers[candidate],
            services,  # type: ignore[arg-type]
            key,
            position,
            execution,
        )
        changes, self._concurrency_changes = self._concurrency_changes, []
        return RemoteTrialResult(
            attempts=collector.rows,
            row=row,
            retries=services.retries,
            stopped_endpoints=dict(self._stopped_endpoints),
            concurrency_changes=changes,
        )

    async def stop_endpoint(self, endpoint: str, why: str) -> None:
        """Stop `endpoint` here too (another worker's gate stopped for it, for reason `why`).

        Its calls in flight are cancelled (connections closed) and recorded as `cancelled`, its
        trials in flight end failed, nothing more is sent, and a trial of its candidates that
        arrives later is not run, as on the worker that stopped.
        """
        self._stopped_endpoints.setdefault(endpoint, why)
        gate = self._services.concurrency.get(endpoint) if self._services is not None else None
        if gate is not None and not gate.stopped:
            gate.stop()

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()


ADDRESS_TIMEOUT_S = 10.0
"""How long `--address` may take to accept a TCP connection before the run is refused."""

WorkerLost = Callable[[dict[str, Any]], None]
"""Told of each lost worker (`trial_id`, `losses`, `cause`, `rescheduled`): a ledger event."""


class RayTrialPool:
    """The driver's handle on the worker actors."""

    def __init__(
        self, actors: list[Any], started_ray: bool, new_actor: Callable[[int], Any], losses: int
    ) -> None:
        self._actors = actors
        self._started_ray = started_ray
        self._new_actor = new_actor
        self._reschedules = losses
        self._next = 0
        self.on_worker_lost: WorkerLost | None = None
        """Where each loss is recorded (the runner sets it to a ledger event)."""

    @classmethod
    def start(cls, manifest: Manifest, address: str | None) -> RayTrialPool:
        """Connect to (or start) Ray and create one worker actor per cluster CPU.

        Args:
            manifest: The frozen manifest the workers run.
            address: Cluster address for `ray.init`; None starts a local instance (or reuses one
                already initialised in this process).

        Raises:
            InputError: when ray is not installed or a candidate declares a rate limit.
            CheckFailed: when a worker cannot load the track or its inputs differ.
        """
        limited = [c.name for c in manifest.spec.candidates if c.rate_limit_per_s]
        if limited:
            raise InputError(
                "rate_limit_per_s is not supported with --executor ray (each worker would pace "
                "on its own); run these candidates with the local executor",
                location=f"candidate {limited[0]}",
            )
        try:
            import ray.exceptions
        except ImportError:
            raise InputError(
                "--executor ray needs ray: pip install -e '.[ray]' in a clone (README: Installing "
                "without make)",
                location="--executor",
            ) from None
        started = False
        if not ray.is_initialized():
            if address is not None:
                check_reachable(address)
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            except ConnectionError as error:
                raise InputError(
                    f"no Ray cluster at {address}: {_cause(error)}", location="--address"
                ) from None
            started = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        count = max(1, min(cpus, manifest.spec.concurrency))
        per_actor = -(-manifest.spec.concurrency // count)
        # ray's typed overloads of `remote` omit the actor option `max_concurrency` (documented).
        # One slot more than its trials: a stop from the driver must not queue behind the
        # trials whose calls it cancels.
        remote_class = ray.remote(num_cpus=1, max_concurrency=per_actor + 1)(  # pyright: ignore[reportCallIssue]
            TrialWorker
        )
        data = manifest.model_dump(mode="json")
        credentials = {
            c.api_key_env: os.environ[c.api_key_env]
            for c in manifest.spec.candidates
            if c.api_key_env and c.api_key_env in os.environ
        }

        def new_actor(index: int) -> Any:
            return remote_class.remote(data, index, credentials, per_actor)

        actors = [new_actor(index) for index in range(count)]
        pool = cls(actors, started, new_actor, manifest.spec.retry.transport_max_retries)
        try:
            ray.get([actor.ready.remote() for actor in actors])
        except ray.exceptions.RayError as error:
            pool.close()
            raise CheckFailed(f"a Ray worker could not start: {_cause(error)}") from None
        return pool

    async def run_trial(
        self, position: int, key: TrialKey, execution: int
    ) -> RemoteTrialResult | None:
        """Run one trial on the next worker (round robin) and await its rows (None: not run).

        A worker lost under it is replaced and the trial run again on the next worker, up to
        `retry.transport_max_retries` times: the lost attempts left no rows (they were
        collected in the dead process), so the trial starts afresh, as on resume.
        """
        import ray.exceptions

        losses = 0
        while True:
            index = self._next % len(self._actors)
            self._next += 1
            actor = self._actors[index]
            try:
                return await actor.run_trial.remote(
                    position, key.case_id, key.candidate, key.trial_index, execution
                )
            except _lost_worker_errors() as error:
                losses += 1
                self._lost(key, losses, _cause(error))
                await self._replace(index, actor)
            except ray.exceptions.RayError as error:
                raise CheckFailed(
                    f"Ray worker failed while running trial {key.trial_id}: {_cause(error)}; "
                    "finished trials are in the ledger, run again to resume"
                ) from None

    async def stop_endpoint(self, endpoint: str, why: str) -> None:
        """Stop `endpoint` on every worker, for reason `why`; wait until each has.

        A worker that cannot be told (lost meanwhile) sends nothing more either: its loss is
        noticed, and recorded, by the trial it was running.
        """
        import asyncio

        await asyncio.gather(
            *(actor.stop_endpoint.remote(endpoint, why) for actor in self._actors),
            return_exceptions=True,
        )

    def _lost(self, key: TrialKey, losses: int, cause: str) -> None:
        """Record a loss; stop the run once the trial has been lost more than it may be."""
        rescheduled = losses <= self._reschedules
        if self.on_worker_lost is not None:
            self.on_worker_lost(
                {
                    "trial_id": key.trial_id,
                    "losses": losses,
                    "cause": cause,
                    "rescheduled": rescheduled,
                }
            )
        if not rescheduled:
            raise CheckFailed(
                f"Ray worker lost {losses} times while running trial {key.trial_id} "
                f"(retry.transport_max_retries = {self._reschedules}): {cause}; finished "
                "trials are in the ledger, run again to resume"
            )

    async def _replace(self, index: int, lost: Any) -> None:
        """Put a fresh worker in the lost one's place (once, whichever trial noticed first)."""
        import ray
        import ray.exceptions

        if self._actors[index] is not lost:
            return
        with contextlib.suppress(ray.exceptions.RayError):
            ray.kill(lost)  # an unavailable actor might come back: it must not run twice
        fresh = self._actors[index] = self._new_actor(index)
        try:
            await fresh.ready.remote()
        except ray.exceptions.RayError as error:
            raise CheckFailed(f"a Ray worker could not be replaced: {_cause(error)}") from None

    def close(self) -> None:
        """Close the workers' sessions, end the actors, and stop Ray if this pool started it."""
        import ray.exceptions

        # Best effort: the actors are killed next either way.
        with contextlib.suppress(TimeoutError, ray.exceptions.RayError):
            ray.get([actor.close.remote() for actor in self._actors], timeout=30)
        for actor in self._actors:
            ray.kill(actor)
        if self._started_ray:
            ray.shutdown()


def _lost_worker_errors() -> tuple[type[BaseException], ...]:
    """Ray's errors for a task whose worker process or node is gone (not an error it raised)."""
    import ray.exceptions

    return (
        ray.exceptions.RayActorError,  # ActorDiedError, ActorUnavailableError
        ray.exceptions.WorkerCrashedError,
        ray.exceptions.NodeDiedError,
        ray.exceptions.LocalRayletDiedError,
    )


def check_reachable(address: str) -> None:
    """Refuse (exit 2) a `HOST:PORT` or `ray://HOST:PORT` address where no gRPC server answers.

    A TCP connection alone is not enough: a port that accepts and stays silent (or answers
    HTTP/1.1, or anything not Ray) keeps `ray.init` retrying its GCS connection for minutes.
    Both of Ray's addresses are gRPC servers, and a gRPC server answers a client's HTTP/2
    connection preface with its own `SETTINGS` frame at once, so that frame is asked for. A
    cluster serving gRPC over TLS (`RAY_USE_TLS`, as Ray reads it) would answer a cleartext
    preface with a TLS alert: there only the TCP connection is checked.

    Raises:
        InputError: naming the address when nothing there accepts a TCP connection and answers
            the HTTP/2 preface within `ADDRESS_TIMEOUT_S` (`auto`, `local` and other forms are
            left to `ray.init`).
    """
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    deadline = time.monotonic() + ADDRESS_TIMEOUT_S
    try:
        with socket.create_connection((host.strip("[]"), int(port)), ADDRESS_TIMEOUT_S) as link:
            reason = None if _ray_uses_tls() else _http2_settings_problem(link, deadline)
    except OSError as error:
        reason = "timed out" if isinstance(error, TimeoutError) else error.strerror or str(error)
    if reason is None:
        return
    raise InputError(
        f"no Ray cluster reachable at {address} ({reason} within {ADDRESS_TIMEOUT_S:g} s)",
        location="--address",
    )


_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
"""A client's HTTP/2 connection preface: the magic line, then an empty `SETTINGS` frame
(RFC 9113, 3.4: length 0, type 4, no flags, stream 0)."""
_FRAME_HEADER_BYTES = 9
_SETTINGS_FRAME = 4


def _ray_uses_tls() -> bool:
    """Whether Ray speaks gRPC over TLS here (`RAY_USE_TLS` = 1 or true, as Ray reads it)."""
    return os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true")


def _http2_settings_problem(link: socket.socket, deadline: float) -> str | None:
    """Why the server on `link` is not an HTTP/2 (gRPC) server, or None when it is.

    An HTTP/2 server's first frame is its own `SETTINGS` (RFC 9113, 3.4): a frame header
    whose type byte (the fourth) is 4. An HTTP/1 server's `HTTP/1.1 400` is not.
    """
    link.sendall(_HTTP2_PREFACE)
    header = b""
    while len(header) < _FRAME_HEADER_BYTES:
        link.settimeout(max(deadline - time.monotonic(), 0.001))
        try:
            chunk = link.recv(_FRAME_HEADER_BYTES - len(header))
        except TimeoutError:
            return "a TCP connection, but no answer to a gRPC handshake"
        if not chunk:
            return "a TCP connection, closed without a gRPC handshake"
        header += chunk
    if header[3] != _SETTINGS_FRAME:
        return "a TCP connection, but an answer that is not gRPC, as Ray's is"
    return None


def _cause(error: BaseException) -> str:
    """The first line of the underlying error of a Ray exception."""
    cause = getattr(error, "cause", None) or error
    text = str(cause).strip().splitlines()
    return text[-1] if text else type(cause).__name__
