"""A transparent adapter wrapper that keeps every hook call and its output for the ledger.

The track records one attempt per trial holding this log (a batch, not one attempt per hook
call: a trace makes dozens of deterministic in-process calls, and one row per call would
multiply the ledger's size without adding information). The log holds, per call, the hook, the
step, the override r' (candidate-visible: it is what the adapter was told) and the output or
the error, so a trial can be re-graded offline from the ledger and the pinned corpus.
"""

from __future__ import annotations

import time
from typing import Any

from trustbench.trb._schema import SelfReport, StepContext


def _jsonable(value: Any) -> Any:
    if isinstance(value, SelfReport):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        try:
            return {str(k): float(v) for k, v in value.items()}
        except (TypeError, ValueError):
            return repr(value)
    return repr(value)


class RecordingAdapter:
    """Wraps an adapter; forwards every hook and appends {hook, t, r_override, output|error}."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "?")
        self.tier = getattr(inner, "tier", None)
        self.supports_override = getattr(inner, "supports_override", None)
        self.calls: list[dict[str, Any]] = []
        self.seconds = 0.0

    def seed(self, value: int) -> None:
        """Forward the seed and log it."""
        self.calls.append({"hook": "seed", "value": value})
        self.inner.seed(value)

    def _run(self, hook: str, context: StepContext, override: Any, fn: Any) -> Any:
        entry: dict[str, Any] = {"hook": hook, "t": context.t}
        if override is not None:
            entry["r_override"] = override.model_dump(mode="json")
        started = time.perf_counter()
        try:
            out = fn()
        except Exception as error:  # the candidate's failure is logged, then scored by the track
            entry["error"] = f"{type(error).__name__}: {error}"
            self.calls.append(entry)
            raise
        finally:
            self.seconds += time.perf_counter() - started
        entry["output"] = _jsonable(out)
        self.calls.append(entry)
        return out

    def emit_r(self, context: StepContext) -> Any:
        """Forward `emit_r`."""
        return self._run("emit_r", context, None, lambda: self.inner.emit_r(context))

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> Any:
        """Forward `act` with its override."""
        return self._run(
            "act", context, r_override, lambda: self.inner.act(context, r_override=r_override)
        )
