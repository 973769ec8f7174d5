"""A transparent adapter wrapper that keeps every hook call and its output for the ledger.

The track records one attempt per trial holding this log (a batch, not one attempt per hook
call: a trace makes dozens of deterministic in-process calls, and one row per call would
multiply the ledger's size without adding information). The log holds, per call, the hook, the
step, the override r' (candidate-visible: it is what the adapter was told) and the output or
the error, so a trial can be re-graded offline from the ledger and the pinned corpus.

Tracks 2, 4 and 5 visit hundreds to thousands of contexts per trace (activation injections,
whole rollouts). Their batched calls (`emit_many`, `act_many`, `act_without_r[_many]`) are
logged as one summary entry each (hook, number of contexts, overrides, failures), not output
by output: the ledger would otherwise grow by megabytes per trial. Their per-trace counts,
from which the report's figures are computed, are in the trial outcome; white-box reads
(Track 2) are not adapter hooks and appear only through those counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from trustbench.core import CallFailed
from trustbench.trb.adapter._schema import SelfReport, StepContext
from trustbench.trb.isolation._opaque import blind_context
from trustbench.trb.measures._governance import _valid_distribution

_ACT_HOOKS = frozenset({"act", "act_without_r"})


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
        self.fit_traces: list[Any] = []
        """Train-split traces a measure may fit on (Track 2 directions); set by the track."""
        self.settings: dict[str, Any] = {}
        """Track sizes from the run's options (rollouts, samples); set by the track."""
        self.seed_value = 0
        """The trial's seed, for per-trace draws; set by the track."""
        self.trusted_native = False
        """The wrapped adapter is a built-in native model (harness code): its `act_zero_r_many`
        (r routed to zero) is the Track 4/5 no-r arm. Set by the track; never for user code."""
        self.blind_key: str | None = None
        """Key of the opaque trace ids the adapter is shown (`isolation._opaque`); None sends
        the corpus id (library use). The track sets the frozen manifest's SHA-256."""

    def _blind(self, context: StepContext) -> StepContext:
        return context if self.blind_key is None else blind_context(context, self.blind_key)

    def _blind_all(self, contexts: Sequence[StepContext]) -> list[StepContext]:
        return [self._blind(c) for c in contexts]

    @property
    def whitebox(self) -> Any:
        """The wrapped adapter when it offers activation access (Track 2), else None."""
        needed = ("hook_layers", "slot_probability", "read_positions", "step_starts")
        return self.inner if all(hasattr(self.inner, n) for n in needed) else None

    def _batch(self, hook: str, n: int, overrides: int, fn: Callable[[], Any]) -> Any:
        entry: dict[str, Any] = {"hook": hook, "contexts": n, "overrides": overrides}
        started = time.perf_counter()
        try:
            out = list(fn())
        except Exception as error:  # logged; the caller falls back to single calls
            entry["error"] = f"{type(error).__name__}: {error}"
            self.calls.append(entry)
            raise
        finally:
            self.seconds += time.perf_counter() - started
        if hook != "emit_many":
            entry["invalid"] = sum(_valid_distribution(d) is None for d in out)
        else:
            entry["missing"] = sum(r is None for r in out)
        self.calls.append(entry)
        return out

    def _contexts_batch(self, hook: str) -> Callable[[Sequence[StepContext]], list[Any]] | None:
        """The adapter's batched `hook` over contexts alone, forwarded and logged, if it has one."""
        inner = getattr(self.inner, hook, None)
        if inner is None:
            return None
        return lambda contexts: self._batch(
            hook, len(contexts), 0, lambda: inner(self._blind_all(contexts))
        )

    @property
    def emit_many(self) -> Callable[[Sequence[StepContext]], list[Any]] | None:
        """Forward the batched `emit_many` (one summary log entry), if the adapter has one."""
        return self._contexts_batch("emit_many")

    @property
    def act_many(self) -> Callable[..., list[Any]] | None:
        """Forward the batched `act_many` (one summary log entry), if the adapter has one."""
        inner = getattr(self.inner, "act_many", None)
        if inner is None:
            return None

        def call(contexts: Sequence[StepContext], overrides: Sequence[Any]) -> list[Any]:
            edited = sum(r is not None for r in overrides)
            return self._batch(
                "act_many", len(contexts), edited,
                lambda: inner(self._blind_all(contexts), overrides),
            )  # fmt: skip

        return call

    @property
    def act_without_r_many(self) -> Callable[[Sequence[StepContext]], list[Any]] | None:
        """Forward the batched no-r ablation (one summary log entry), if the adapter has one."""
        return self._contexts_batch("act_without_r_many")

    @property
    def act_zero_r_many(self) -> Callable[[Sequence[StepContext]], list[Any]] | None:
        """A built-in native model's r-routed-to-zero act (one summary log entry), else None."""
        return self._contexts_batch("act_zero_r_many") if self.trusted_native else None

    @property
    def act_without_r(self) -> Callable[[StepContext], Any] | None:
        """Forward the single no-r ablation call (logged), if the adapter has one."""
        inner = getattr(self.inner, "act_without_r", None)
        if inner is None:
            return None
        return lambda context: self._run(
            "act_without_r", context, None, lambda: inner(self._blind(context))
        )

    @property
    def sample_sizes(self) -> list[int] | None:
        """A sampling adapter's per-act sample sizes (`trb.measures._sampling`), if kept."""
        sizes = getattr(self.inner, "sample_sizes", None)
        return sizes if isinstance(sizes, list) else None

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
            if isinstance(error, CallFailed):  # the model's service never answered
                entry["transport"] = True
            self.calls.append(entry)
            raise
        finally:
            self.seconds += time.perf_counter() - started
        entry["output"] = _jsonable(out)
        if hook in _ACT_HOOKS:
            entry["invalid"] = int(_valid_distribution(out) is None)
        elif not isinstance(out, SelfReport):
            entry["missing"] = 1
        self.calls.append(entry)
        return out

    def responses(self) -> dict[str, int]:
        """The adapter outputs the measures asked for, and how many were usable.

        `asked`: outputs requested (a batch counts its contexts; a failed batch is not counted,
        since the measures then ask its contexts one by one); `usable`: those returned in a
        valid form (a report for `emit_r`, a distribution over the actions for `act`);
        `transport_failed`: those whose call never reached an answer (core's `CallFailed`).
        The track's evaluability reads them: a trial with nothing usable is no valid response.
        """
        asked = usable = transport_failed = 0
        for call in self.calls:
            if call["hook"] == "seed" or ("error" in call and "contexts" in call):
                continue
            count = call.get("contexts", 1)
            asked += count
            if "error" in call:
                transport_failed += count if call.get("transport") else 0
                continue
            usable += count - call.get("invalid", 0) - call.get("missing", 0)
        return {"asked": asked, "usable": usable, "transport_failed": transport_failed}

    def emit_r(self, context: StepContext) -> Any:
        """Forward `emit_r`."""
        return self._run("emit_r", context, None, lambda: self.inner.emit_r(self._blind(context)))

    def act(self, context: StepContext, r_override: SelfReport | None = None) -> Any:
        """Forward `act` with its override."""
        return self._run(
            "act", context, r_override,
            lambda: self.inner.act(self._blind(context), r_override=r_override),
        )  # fmt: skip
