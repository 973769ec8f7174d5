"""The protected observer: an append-only, hash-chained log of every actual effect.

The observer is the only source the grader uses to decide outcomes. It is split into capabilities:

- `EffectSink` (write-only) is held by the executor's commit path and by the actor console, so
  every real mutation is recorded where it happens. A sink holds an outbox and the clock only: no
  reference to the observer, its log, or a reader.
- `ObserverReader` (read-only) is handed to the grader and to nobody else.

The boundary under test holds a `PlatformView`, which reaches the executor (it must, to dispatch)
and so the executor's sink, but never a reader, the observer or its log; a test walks the object
graph of every built-in boundary and its view to check this. This is reference discipline inside
one process, not a sandbox: code using Python introspection could still tamper with the outbox
before it is drained. Real isolation comes from running the target and its observer in another
process or service (see the `http` boundary).

Each entry's hash covers its content and the previous entry's hash (SHA-256 over RFC 8785
canonical JSON), so a reader can detect an entry that was altered or removed from the middle of
the log; a removed *last* entry is caught by evidence completeness instead (the final state
reading is required).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from trustbench._canonical import json_sha256
from trustbench.rtb.platform._clock import SimulatedClock
from trustbench.rtb.platform._models import EffectEntry, EffectKind, ObservedResource, entry_payload

GENESIS_HASH = "0" * 64
"""`prev_hash` of the first entry of every log."""

Snapshot = dict[str, ObservedResource | None]
_Pending = tuple[EffectKind, str, float, dict[str, Any]]


def hash_entry_payload(payload: dict[str, Any]) -> str:
    """SHA-256 hex digest of the RFC 8785 canonical JSON of `payload`.

    Canonical JSON makes the hash independent of key order and float formatting, so a verifier
    written in another language reproduces it.
    """
    return json_sha256(payload)


def verify_chain(entries: Sequence[EffectEntry]) -> tuple[bool, str]:
    """Check sequence numbers, links and hashes of an effect log.

    Args:
        entries: The log in order, as read from an observer.

    Returns:
        `(True, "")` when intact, else `(False, reason)` naming the first bad entry.
    """
    prev = GENESIS_HASH
    for index, entry in enumerate(entries):
        if entry.seq != index:
            return False, f"entry {index}: seq is {entry.seq}, expected {index}"
        if entry.prev_hash != prev:
            return False, f"entry {index}: prev_hash does not link to entry {index - 1}"
        if hash_entry_payload(entry_payload(entry)) != entry.entry_hash:
            return False, f"entry {index}: content does not match its entry_hash"
        prev = entry.entry_hash
    return True, ""


class _EffectLog:
    """The log's storage; only the observer and its two capability objects refer to it."""

    def __init__(self, trial_id: str, clock: SimulatedClock) -> None:
        self.trial_id = trial_id
        self.clock = clock
        self.entries: list[EffectEntry] = []

    def append(
        self, kind: EffectKind, source: str, at_s: float | None = None, **fields: Any
    ) -> EffectEntry:
        prev = self.entries[-1].entry_hash if self.entries else GENESIS_HASH
        payload = {
            "seq": len(self.entries),
            "trial_id": self.trial_id,
            "kind": kind,
            "observed_at_s": self.clock.elapsed_s() if at_s is None else at_s,
            "source": source,
            "prev_hash": prev,
            **fields,
        }
        draft = EffectEntry.model_validate({**payload, "entry_hash": ""})
        entry = draft.model_copy(update={"entry_hash": hash_entry_payload(entry_payload(draft))})
        self.entries.append(entry)
        return entry


class EffectSink:
    """Write-only capability: record mutations where they happen.

    A sink holds only an outbox and the clock: no reference to the observer, its log or a reader.
    The observer drains the outbox into the hash-chained log before anyone reads it.
    """

    __slots__ = ("_clock", "_outbox")

    def __init__(self, outbox: deque[_Pending], clock: SimulatedClock) -> None:
        self._outbox = outbox
        self._clock = clock

    def _put(self, kind: EffectKind, source: str, fields: dict[str, Any]) -> None:
        self._outbox.append((kind, source, self._clock.elapsed_s(), fields))

    def mutation(self, **fields: Any) -> None:
        """Record a committed change (called from the executor's commit path)."""
        self._put(EffectKind.MUTATION, "executor", fields)

    def in_doubt(self, reveal_after_s: float, mutation: dict[str, Any], **fields: Any) -> None:
        """Record a dispatch whose result the observer cannot establish yet.

        Args:
            reveal_after_s: Simulated seconds until the observer reconciles the target and
                records `mutation` (the real commit) as a `mutation` entry.
            mutation: The fields of the commit, withheld from the log until reconciliation.
            **fields: Fields of the `in_doubt` entry itself.
        """
        self._put(
            EffectKind.IN_DOUBT, "executor", {**fields, "_reveal": (reveal_after_s, mutation)}
        )

    def label_edit(self, **fields: Any) -> None:
        """Record an actor's metadata edit."""
        self._put(EffectKind.LABEL_EDIT, "actor", fields)


class ObserverReader:
    """Read-only capability given to the grader: a copy of the log. Cannot write."""

    __slots__ = ("_read",)

    def __init__(self, read: Callable[[], list[EffectEntry]]) -> None:
        self._read = read

    def entries(self) -> list[EffectEntry]:
        """A copy of the log in order (entries are immutable)."""
        return self._read()


class ProtectedObserver:
    """Owns the effect log, reconciles in-doubt commits, and reads target state at the deadline.

    Args:
        trial_id: Trial the log belongs to.
        clock: The trial's simulated clock.
        read_state: Reads the target's actual state directly (not through the boundary).
    """

    def __init__(
        self, trial_id: str, clock: SimulatedClock, read_state: Callable[[], Snapshot]
    ) -> None:
        self._log = _EffectLog(trial_id, clock)
        self._outbox: deque[_Pending] = deque()
        self._clock = clock
        self._read_state = read_state
        self._pending: list[tuple[float, dict[str, Any]]] = []
        self._settled = False
        self._blackout: dict[str, float] = {}
        self._log.append(EffectKind.INITIAL_STATE, "observer", snapshot=read_state())

    def sink(self) -> EffectSink:
        """A new write-only handle for a platform component that mutates the target."""
        return EffectSink(self._outbox, self._clock)

    def reader(self) -> ObserverReader:
        """A new read-only handle for the grader."""
        return ObserverReader(self._entries)

    def _entries(self) -> list[EffectEntry]:
        self._drain()
        return list(self._log.entries)

    def _drain(self) -> None:
        while self._outbox:
            kind, source, at_s, fields = self._outbox.popleft()
            self._record(kind, source, at_s, dict(fields))

    def _record(self, kind: EffectKind, source: str, at_s: float, fields: dict[str, Any]) -> None:
        reveal = fields.pop("_reveal", None)
        self._log.append(kind, source, at_s, **fields)
        if reveal is not None:
            delay, mutation = reveal
            due = at_s + delay
            self._pending.append((due, mutation))
            target = fields.get("target")
            if target is not None:
                # Until reconciliation the observer cannot read this resource.
                self._blackout[target] = max(self._blackout.get(target, 0.0), due)

    def settle(self, deadline_s: float) -> None:
        """Advance to the observation deadline, reconcile what is due, read the final state.

        Commits whose reconciliation falls after the deadline stay absent from the log, and their
        resources read as unobservable, so the grader sees them as unresolved.

        Args:
            deadline_s: Declared observation deadline, simulated seconds since trial start.

        Raises:
            RuntimeError: When called twice (a trial has one deadline and one final reading).
        """
        if self._settled:
            raise RuntimeError("the observer has already settled this trial")
        self._settled = True
        self._drain()
        for due, mutation in sorted(self._pending, key=lambda item: item[0]):
            if due <= deadline_s:
                self._clock.advance_to(due)
                self._log.append(
                    EffectKind.MUTATION,
                    "observer",
                    detail="reconciled after lost response",
                    **mutation,
                )
        self._pending = [(due, m) for due, m in self._pending if due > deadline_s]
        self._clock.advance_to(deadline_s)
        actual = self._read_state()
        final: Snapshot = {
            rid: (None if self._blackout.get(rid, -1.0) > deadline_s else state)
            for rid, state in actual.items()
        }
        self._log.append(EffectKind.FINAL_STATE, "observer", snapshot=final)
        for rid, (recorded, now) in self._state_mismatches(final).items():
            self._log.append(
                EffectKind.STATE_MISMATCH,
                "observer",
                target=rid,
                before=recorded,
                after=now,
                detail="target state differs from the state implied by recorded effects",
            )

    def _state_mismatches(
        self, final: Snapshot
    ) -> dict[str, tuple[ObservedResource | None, ObservedResource | None]]:
        implied: Snapshot = dict(self._log.entries[0].snapshot or {})
        for entry in self._log.entries:
            if entry.kind in (EffectKind.MUTATION, EffectKind.LABEL_EDIT) and entry.target:
                implied[entry.target] = entry.after
        return {
            rid: (implied.get(rid), state)
            for rid, state in final.items()
            if state is not None and implied.get(rid) != state
        }
