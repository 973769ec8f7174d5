"""Batched, failure-counting calls into an adapter, shared by Tracks 2, 4, 5 and 6.

Adapters expose one-context hooks (`emit_r`, `act`); some also offer batched ones
(`emit_many`, `act_many`, `act_without_r_many`), which the tracks use when present because
rollouts visit thousands of contexts. Any exception or malformed distribution from the
candidate becomes `None`: the tracks count it as a failure (never as success).

The no-r arm of Tracks 4 and 5 is the harness's own (`ablation_policy`): r_override set to the
corpus mean r. An adapter-provided `act_without_r` is not trusted for the comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from trustbench.errors import InputError
from trustbench.trb.adapter._protocol import Adapter
from trustbench.trb.adapter._schema import SelfReport, StepContext
from trustbench.trb.corpus._format import Trace
from trustbench.trb.measures._batched import act_many as act_many  # shared with Track 1
from trustbench.trb.measures._batched import emit_many as emit_many

Dist = dict[str, float] | None
BatchPolicy = Callable[[Sequence[StepContext]], list[Dist]]
"""Maps contexts to action distributions (None where the candidate failed)."""


class AblationUnsupported(Exception):
    """The harness cannot build the no-r arm (no r_override); tracks report `not run`."""


def mean_report(traces: Sequence[Trace]) -> SelfReport:
    """The corpus mean r: slot-wise mode of the categorical slots, mean confidence.

    It is one fixed r for every context, so acting on it carries no step's r information: the
    harness's no-r arm. Ties in a mode break by the schema's value order (deterministic).

    Raises:
        InputError: no trace with a step.
    """
    reports = [step.r for trace in traces for step in trace.steps]
    if not reports:
        raise InputError("the no-r arm needs at least one trace step to average r over")

    def mode(slot: str) -> str:
        values = [getattr(r, slot) for r in reports]
        return max(sorted(set(values)), key=values.count)

    return SelfReport(
        goal=mode("goal"),  # type: ignore[arg-type]
        belief=mode("belief"),  # type: ignore[arg-type]
        planned_next=mode("planned_next"),  # type: ignore[arg-type]
        confidence=sum(r.confidence for r in reports) / len(reports),
    )


HARNESS_ABLATION = "harness no-r arm: act(c, r_override = corpus mean r)"
"""How Tracks 4 and 5 build their comparison arm (recorded beside each figure)."""


def ablation_policy(adapter: Adapter, r_bar: SelfReport) -> BatchPolicy:
    """The no-r arm, built by the harness: act(c, r_override=r_bar) for every context.

    The adapter's own `act_without_r` is never used for the comparison: an adapter could
    sabotage it to inflate Track 4's ratio and Track 5's lift. Each call gets a fresh copy of
    r_bar, in the same form as every other override.

    Raises:
        AblationUnsupported: the adapter declares it does not support r_override.
    """
    if getattr(adapter, "supports_override", True) is False:
        raise AblationUnsupported(
            f"{adapter.name} does not support r_override, so the harness cannot route r away "
            "(the no-r arm is act(c, r_override = corpus mean r))"
        )

    def policy(contexts: Sequence[StepContext]) -> list[Dist]:
        return act_many(adapter, contexts, [r_bar.model_copy() for _ in contexts])

    return policy
