"""A TRB measure defined outside the package: Track 1's headline read as a new axis key."""

from __future__ import annotations

from typing import Any

from trustbench.trb.track._measures import GovernanceMeasure


class SecondGovernance(GovernanceMeasure):
    """Fills the G axis again: a run listing it beside `governance` must be refused."""

    key = "governance-again"


class Plain:
    """A measure on no built-in's key, filling the attribution axis with a constant count."""

    key = "outside-attribution"
    axis = "attr"
    headline = "outside_rate"
    title = "Track 3 from outside"

    def run(self, adapter: Any, trace: Any) -> dict[str, Any]:
        return {"applicable": True}

    def failed(self, trace: Any) -> dict[str, Any]:
        return {"applicable": True, "failed": True}

    def figures(self, rows: list[Any], stats: Any, label: str) -> list[Any]:
        from trustbench.core.figures import Figure

        n = len(rows)
        ok = sum(not r.failed for r in rows)
        return [
            Figure(
                name="outside_rate",
                kind="rate",
                status="measured",
                estimate=ok / n,
                numerator=ok,
                denominator=n,
                unit="trial",
                description=f"ok {label}",
            )
        ]


SECOND_GOVERNANCE = SecondGovernance()
PLAIN = Plain()
