"""Run one trial from a fresh context: the one path shared by the local and the Ray executors.

Whatever happens inside the track (a failed call, a timeout, a defect) becomes a `failed` trial
row with its error class; nothing a track does can crash the run or vanish from the ledger.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from trustbench._canonical import canonical_json
from trustbench.core._clock import utc_now
from trustbench.core._context import CallFailed, PolicyViolation, RunServices, TrialContext
from trustbench.core._track import Track, TrialKey, TrialOutcome
from trustbench.core.spec._manifest import Manifest
from trustbench.providers._types import ChatProvider


@dataclass
class RemoteTrialResult:
    """What a trial run elsewhere (a Ray worker) hands back to the ledger's one writer."""

    attempts: list[dict[str, Any]]
    """The trial's attempt rows, in order (committed with its row in one transaction)."""
    row: dict[str, Any]
    """The trial row."""
    retries: int
    """Transport retries the trial made."""
    stopped_endpoints: dict[str, str] = field(default_factory=dict)
    """Endpoint -> why the worker's gate for it stopped (`AdaptiveConcurrency.stop_reason`): its
    server could not answer one call alone, so its candidates stop cluster-wide."""
    concurrency_changes: list[dict[str, Any]] = field(default_factory=list)
    """The worker's adaptive-concurrency changes since its last trial handed back (each a
    `concurrency_changed` event)."""


def _failed(error_class: str, error: str) -> TrialOutcome:
    return TrialOutcome(status="failed", outcome=None, error_class=error_class, error=error)


async def execute_trial(
    track: Track,
    manifest: Manifest,
    provider: ChatProvider | None,
    services: RunServices,
    key: TrialKey,
    position: int,
    execution: int,
) -> dict[str, Any]:
    """Run one trial from a fresh context and return its `trials` row (not yet recorded).

    Shared by the local executor and the Ray workers, so a trial is run the same way wherever it
    runs; its attempts go to `services.ledger` as they happen.

    Args:
        track: The loaded track.
        manifest: The frozen manifest.
        provider: The candidate's provider (None for an in-process candidate without an entry).
        services: The run's shared services (ledger or attempt collector, retry policy, pacing).
        key: The trial.
        position: Its place in the seeded order.
        execution: Its execution number (1 unless earlier executions were interrupted).

    Returns:
        The values of the trial's `trials` row.
    """
    import asyncio

    candidate = next(c for c in manifest.spec.candidates if c.name == key.candidate)
    ctx = TrialContext(
        key,
        candidate,
        manifest,
        provider.for_trial() if provider is not None else None,
        services,
        execution,
    )
    started_at = utc_now()
    started = time.perf_counter()
    try:
        async with asyncio.timeout(manifest.spec.trial_timeout_s) as ctx.trial_limit:
            outcome = await track.run_trial(key, ctx)
        if not isinstance(outcome, TrialOutcome):
            outcome = _failed("harness_error", f"run_trial returned {type(outcome).__name__}")
    except CallFailed as error:
        outcome = _failed(error.error_class, str(error))
    except TimeoutError:
        outcome = _failed("trial_timeout", f"trial exceeded {manifest.spec.trial_timeout_s} s")
    except PolicyViolation as error:
        outcome = _failed("harness_error", str(error))
    except Exception as error:  # a track defect is recorded as such, never hidden or fatal
        outcome = _failed("harness_error", f"{type(error).__name__}: {error}")
    try:
        outcome_json = canonical_json(outcome.outcome).decode("utf-8")
    except (TypeError, ValueError) as error:
        outcome = _failed("harness_error", f"outcome is not JSON-serialisable: {error}")
        outcome_json = "null"
    return {
        "trial_id": key.trial_id,
        "case_id": key.case_id,
        "candidate": key.candidate,
        "trial_index": key.trial_index,
        "execution": execution,
        "order_position": position,
        "status": outcome.status,
        "outcome": ctx.redact(outcome_json),
        "error_class": outcome.error_class,
        "error": ctx.redact(outcome.error),
        "started_at": started_at,
        "finished_at": utc_now(),
        "duration_s": time.perf_counter() - started,
        "attempts": ctx.attempts_recorded,
    }
