"""The adapter conformance kit behind `trustbench trb check-adapter MODULE:FACTORY`.

It runs a user's adapter on a small reference-world corpus and checks, hook by hook: the
declared attributes, emit_r's typed slots, act's normalised distributions, determinism under
a seed, and that r_override is either applied or declared unsupported (raising
`OverrideUnsupported`), never silently ignored. Every failure names the hook, the check, the
trace and step, and what was expected versus what came back.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from trustbench._docstrings import documented
from trustbench.errors import InputError
from trustbench.trb.adapter._protocol import (
    AdapterTier,
    OverrideUnsupported,
    SelfReport,
    StepContext,
)

if TYPE_CHECKING:
    from trustbench.trb.corpus import Trace

OVERRIDE_EFFECT_THRESHOLD = 1e-6
"""TV below which an overridden distribution counts as unchanged."""


class ConformanceCheck(BaseModel):
    """One conformance check's verdict."""

    model_config = documented(extra="forbid")

    hook: str
    """`factory`, `attributes`, `emit_r`, `act` or `seed`."""
    check: str
    """What was checked (e.g. `normalised distribution`)."""
    passed: bool
    """Whether the check passed."""
    detail: str
    """Where it failed and expected vs got, or what was covered when it passed."""


def load_factory(spec: str) -> Callable[[], Any]:
    """Import `MODULE:FACTORY` (the current directory is importable, as for `python -m`)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(f"expected MODULE:FACTORY, got {spec!r}", location="check-adapter")
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise InputError(f"cannot import module {module_name!r}: {error}", location=spec) from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise InputError(f"module {module_name!r} has no callable {attr!r}", location=spec)
    return factory


def _where(context: StepContext) -> str:
    return f"trace {context.trace_id} step {context.t}"


def _distribution_problem(dist: object) -> str | None:
    """The world protocol's check of an action distribution against the corridor's actions.

    Imported here, not at the top: the world package imports this package's contract.
    """
    from trustbench.trb.world._protocol import distribution_problem
    from trustbench.trb.world._registry import DEFAULT_WORLD_ID, world_for

    return distribution_problem(world_for(DEFAULT_WORLD_ID).declaration, dist)


class _HookError(Exception):
    """A hook raised; carries which hook and where, for the report."""

    def __init__(self, hook: str, where: str, error: Exception) -> None:
        self.hook = hook
        super().__init__(f"{hook}() at {where} raised {type(error).__name__}: {error}")


def _call(hook: str, where: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as error:  # user code: any failure becomes a precise report
        raise _HookError(hook, where, error) from error


def _contexts(traces: list[Trace]) -> list[tuple[Trace, int]]:
    return [(t, s.t) for t in traces for s in t.steps]


def check_adapter(
    factory: Callable[[], Any], *, n_traces: int = 4, seed: int = 0
) -> list[ConformanceCheck]:
    """Run the conformance kit on an adapter factory.

    Args:
        factory: Zero-argument callable returning an adapter.
        n_traces: Reference-world traces to exercise it on.
        seed: Seed passed to `adapter.seed` for the determinism check.

    Returns:
        One `ConformanceCheck` per check; later checks are skipped when an earlier one
        makes them meaningless (e.g. no adapter was built).
    """
    results: list[ConformanceCheck] = []
    record = _recorder(results)
    adapter = _built_adapter(factory, record)
    if adapter is None:
        return results

    # The kit's corpus and measures sit above the adapter contract, which they import: imported
    # here, so importing the contract does not import them.
    from trustbench.trb.corpus import generate_split

    traces = generate_split("eval", n_traces, seed=20_000 + seed)
    contexts = _contexts(traces)

    def run_all() -> tuple[list[Any], list[Any]]:
        _call("seed", "start", lambda: adapter.seed(seed))
        emitted, acted = [], []
        for trace, t in contexts:
            ctx = trace.context(t)
            emitted.append(_call("emit_r", _where(ctx), lambda ctx=ctx: adapter.emit_r(ctx)))
            acted.append(_call("act", _where(ctx), lambda ctx=ctx: adapter.act(ctx)))
        return emitted, acted

    try:
        emitted, acted = run_all()
    except _HookError as error:
        record(error.hook, "runs on reference contexts", str(error), "")
        return results

    record(
        "emit_r",
        "typed schema slots",
        _schema_problem(contexts, emitted),
        f"{len(contexts)} contexts validate as SelfReport",
    )
    record(
        "act",
        "normalised distribution",
        _normalisation_problem(contexts, acted),
        f"{len(contexts)} distributions sum to 1",
    )
    try:
        emitted2, acted2 = run_all()
        problem = _determinism_problem(contexts, (emitted, acted), (emitted2, acted2), seed)
    except _HookError as error:
        problem = f"second run: {error}"
    record(
        "seed",
        "deterministic under a seed",
        problem,
        f"identical outputs on {len(contexts)} contexts",
    )

    _check_override(adapter, contexts, acted, record)
    return results


def check_slot_adapter(factory: Callable[[], Any]) -> list[ConformanceCheck]:
    """The kit's checks that need no context, for an adapter in a world with its own slots.

    Such a world generates no contexts to exercise the hooks on (its corpus is recorded
    sessions), so the kit checks that the factory builds an adapter declaring its attributes
    and hooks; every answer the adapter gives in the run is then checked against the world's
    declaration where the harness receives it, an invalid one counted as the adapter's.
    """
    results: list[ConformanceCheck] = []
    _built_adapter(factory, _recorder(results))
    return results


def _recorder(results: list[ConformanceCheck]) -> Callable[[str, str, str | None, str], bool]:
    """A function appending one check's verdict to `results` (True when it passed)."""

    def record(hook: str, check: str, problem: str | None, ok_detail: str) -> bool:
        results.append(
            ConformanceCheck(
                hook=hook, check=check, passed=problem is None, detail=problem or ok_detail
            )
        )
        return problem is None

    return record


def _built_adapter(
    factory: Callable[[], Any], record: Callable[[str, str, str | None, str], bool]
) -> Any:
    """The factory's adapter when it builds one declaring its attributes, else None (recorded)."""
    try:
        adapter = factory()
    except Exception as error:  # any failure of user code is reported, not raised
        record(
            "factory", "builds an adapter", f"factory raised {type(error).__name__}: {error}", ""
        )
        return None
    record("factory", "builds an adapter", None, f"built {type(adapter).__name__}")
    problems = _attribute_problems(adapter)
    if not record(
        "attributes",
        "declares name, tier, supports_override, hooks",
        "; ".join(problems) or None,
        f"tier {getattr(adapter, 'tier', None)}",
    ):
        return None
    return adapter


def _attribute_problems(adapter: Any) -> list[str]:
    """What the adapter's declared attributes and hooks lack (empty when all are there)."""
    problems = []
    if not isinstance(getattr(adapter, "name", None), str):
        problems.append(f"name: expected str, got {type(getattr(adapter, 'name', None)).__name__}")
    tier = getattr(adapter, "tier", None)
    if str(tier) not in {t.value for t in AdapterTier}:
        problems.append(f"tier: expected one of {[t.value for t in AdapterTier]}, got {tier!r}")
    if not isinstance(getattr(adapter, "supports_override", None), bool):
        problems.append("supports_override: expected bool")
    for method in ("seed", "emit_r", "act"):
        if not callable(getattr(adapter, method, None)):
            problems.append(f"{method}: expected a method, missing")
    return problems


def _schema_problem(contexts: list[tuple[Trace, int]], emitted: list[Any]) -> str | None:
    """The first `emit_r` output that is not a valid `SelfReport`, named by trace, step, slot."""
    for (trace, t), out in zip(contexts, emitted, strict=True):
        try:
            out if isinstance(out, SelfReport) else SelfReport.model_validate(out)
        except ValidationError as error:
            first = error.errors()[0]
            slot = ".".join(str(p) for p in first["loc"]) or "(report)"
            return (
                f"{_where(trace.context(t))}: slot '{slot}' {first['msg']} "
                f"(got {first.get('input')!r})"
            )
    return None


def _normalisation_problem(contexts: list[tuple[Trace, int]], acted: list[Any]) -> str | None:
    """The first `act` output that is not a normalised distribution over the actions."""
    for (trace, t), dist in zip(contexts, acted, strict=True):
        issue = _distribution_problem(dist)
        if issue:
            return f"act(context) at {_where(trace.context(t))}: {issue}"
    return None


def _determinism_problem(
    contexts: list[tuple[Trace, int]],
    first: tuple[list[Any], list[Any]],
    second: tuple[list[Any], list[Any]],
    seed: int,
) -> str | None:
    """The first context whose `emit_r` or `act` output differs between two seeded runs."""
    for (trace, t), e1, a, e2, b in zip(contexts, *first, *second, strict=True):
        if e1 != e2:
            return (
                f"emit_r at {_where(trace.context(t))} differs between two runs under "
                f"seed {seed}: {e1!r} vs {e2!r}"
            )
        if isinstance(a, dict) and isinstance(b, dict) and a != b:
            return (
                f"act at {_where(trace.context(t))} differs between two runs under "
                f"seed {seed}: {a} vs {b}"
            )
    return None


def _check_override(
    adapter: Any,
    contexts: list[tuple[Trace, int]],
    acted: list[Any],
    record: Callable[[str, str, str | None, str], bool],
) -> None:
    """Override applied (some edit that changes Phi changes act) or declared unsupported."""
    from trustbench.trb.measures._governance import total_variation
    from trustbench.trb.world import reference_continuation

    if not adapter.supports_override:
        trace, t = contexts[0]
        r_prime = trace.steps[t].counterfactuals[0].r_prime
        try:
            adapter.act(trace.context(t), r_override=r_prime)
        except OverrideUnsupported:
            record(
                "act",
                "override declared unsupported",
                None,
                "raises OverrideUnsupported as declared",
            )
            return
        except Exception as error:
            record(
                "act",
                "override declared unsupported",
                f"expected OverrideUnsupported, got {type(error).__name__}: {error}",
                "",
            )
            return
        record(
            "act",
            "override declared unsupported",
            "supports_override is False but act(context, r_override) returned a result instead of "
            "raising OverrideUnsupported (a silently ignored override would score as "
            "epiphenomenal)",
            "",
        )
        return
    edits = changed = 0
    for (trace, t), base in zip(contexts, acted, strict=True):
        step = trace.steps[t]
        for cf in step.counterfactuals:
            if total_variation(cf.continuation, reference_continuation(step.r)) < 1e-9:
                continue  # an edit that does not change Phi need not change action
            try:
                got = adapter.act(trace.context(t), r_override=cf.r_prime)
            except OverrideUnsupported:
                record(
                    "act",
                    "override applied",
                    f"act raised OverrideUnsupported at {_where(trace.context(t))} although "
                    "supports_override is True",
                    "",
                )
                return
            issue = _distribution_problem(got)
            if issue:
                record(
                    "act",
                    "override applied",
                    f"act(context, r_override) at {_where(trace.context(t))} "
                    f"({cf.slot} edit): {issue}",
                    "",
                )
                return
            edits += 1
            changed += total_variation(got, base) > OVERRIDE_EFFECT_THRESHOLD
    problem = None
    if edits and not changed:
        problem = (
            "supports_override is True but the override is never applied: "
            "act(context, r_override) "
            f"equals act(context) on all {edits} edits whose reference continuation differs "
            f"(expected a change of TV > {OVERRIDE_EFFECT_THRESHOLD} on at least one)"
        )
    record(
        "act",
        "override applied",
        problem,
        f"override changed the distribution on {changed}/{edits} edits",
    )
