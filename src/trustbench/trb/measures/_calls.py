"""Batched, failure-counting calls into an adapter, shared by Tracks 2, 4, 5 and 6.

Adapters expose one-context hooks (`emit_r`, `act`); some also offer batched ones
(`emit_many`, `act_many`, `act_without_r_many`), which the tracks use when present because
rollouts visit thousands of contexts. Any exception or malformed distribution from the
candidate becomes `None`: the tracks count it as a failure (never as success).

The no-r arm of Tracks 4 and 5 is the harness's own (`trb.track._measure_common.NoRArm`),
asked through r_override (`require_override` refuses an adapter without it); an
adapter-provided `act_without_r` is never trusted for the comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from trustbench.trb.adapter._protocol import Adapter
from trustbench.trb.adapter._schema import StepContext
from trustbench.trb.measures._batched import act_many as act_many  # shared with Track 1
from trustbench.trb.measures._batched import emit_many as emit_many

Dist = dict[str, float] | None
BatchPolicy = Callable[[Sequence[StepContext]], list[Dist]]
"""Maps contexts to action distributions (None where the candidate failed)."""


class AblationUnsupported(Exception):
    """The harness cannot build the no-r arm (no r_override); tracks report `not run`."""


def require_override(adapter: Adapter) -> None:
    """Refuse an adapter the harness cannot route r away from (it takes no r_override).

    The no-r arm is asked through r_override, never through the adapter's own `act_without_r`:
    an adapter could sabotage that to inflate Track 4's ratio and Track 5's lift.

    Raises:
        AblationUnsupported: the adapter declares it does not support r_override.
    """
    if getattr(adapter, "supports_override", True) is False:
        raise AblationUnsupported(
            f"{adapter.name} does not support r_override, so the harness cannot route r away "
            "for the no-r arm"
        )
