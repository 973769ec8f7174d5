"""Track 6 (transfer) as a `trb/profile` measure: every track on held-out families."""

from __future__ import annotations

from typing import Any

from trustbench.core.figures import Figure, Interval, not_run_figure
from trustbench.trb.corpus._format import Trace
from trustbench.trb.track._lookup import BOOTSTRAP
from trustbench.trb.track._measures import MeasureNames, MeasureRow, StatsPlan
from trustbench.trb.track._transfer_flags import drop_interval


class TransferMeasure(MeasureNames, key="transfer", axis="trans", headline="transfer_min[G_star]"):
    """Track 6: each other track's headline at its worst transfer context, and the drop.

    The headline is taken at governance's G* (issue 16).
    """

    derived = True
    """Computed from the other measures' figures per split; nothing runs per trace."""

    def run(self, adapter: Any, trace: Trace) -> dict[str, Any]:
        """Nothing per trace (see `derive`)."""
        return {}

    def failed(self, trace: Trace) -> dict[str, Any]:
        """Nothing per trace."""
        return {}

    def figures(self, rows: list[MeasureRow], stats: StatsPlan, label: str) -> list[Figure]:
        """Nothing per split (see `derive`)."""
        return []

    def derive(
        self, by_split: dict[str, list[Figure]], headlines: list[str], label: str
    ) -> list[Figure]:
        """Per headline: its minimum over the non-eval splits, and its drop from eval.

        The minimum carries that split's figure (and interval); the drop is a difference of
        two estimates, for which no joint interval is claimed. A context where the headline
        was not measured (e.g. the `transfer_length` family for a reference model whose
        encoder has one corridor size: its trials are "not applicable"; or `transfer_encoding`
        for any native adapter: a report encoding is proxy text) is left out of the minimum
        and named, with its reason, in the figure's description, never read as 0; with no
        measured context the minimum is "not run".

        Args:
            by_split: Figures per split (bare names).
            headlines: The other measures' headline figure names.
            label: Description suffix (TRB version, corpus, tier).
        """
        contexts = sorted(s for s in by_split if s != "eval")
        out = []
        for name in headlines:
            found = [(s, next((f for f in by_split[s] if f.name == name), None)) for s in contexts]
            measured = [(s, f) for s, f in found if f is not None and f.status == "measured"]
            missing = [s for s, f in found if f is None or f.status != "measured"]
            text = f"min over transfer contexts {[s for s, _ in measured]} of {name} {label}"
            if missing:
                text += f"; not measured on {missing}, left out"
                why = {s: f.reason for s, f in found if s in missing and f and f.reason}
                text += "".join(f"; {s}: {reason}" for s, reason in why.items())
            if not measured:
                why = (
                    "the run has no transfer context (track_options.splits)"
                    if not contexts
                    else f"{name} not measured on {missing}"
                )
                out.append(not_run_figure(f"transfer_min[{name}]", description=text, reason=why))
                continue
            split, worst = min(measured, key=lambda p: p[1].estimate)  # type: ignore[arg-type,return-value]
            out.append(
                worst.model_copy(
                    update={"name": f"transfer_min[{name}]",
                            "description": f"{text}; worst context: {split}"}
                )
            )  # fmt: skip
            home = next((f for f in by_split.get("eval", []) if f.name == name), None)
            if home is not None and home.status == "measured" and worst.estimate is not None:
                pair = [
                    *by_split.get("eval", []),
                    worst.model_copy(update={"name": f"{split}.{name}"}),
                ]
                low, high = drop_interval(pair, name, split)
                intervals = [] if low is None else [Interval(
                    method=BOOTSTRAP, confidence=0.9, sidedness="two_sided", lower=low, upper=high,
                    note="eval lower - transfer upper, eval upper - transfer lower of the two "
                    "95% trace-bootstrap intervals (disjoint traces): covers the drop at least "
                    "90% of the time; conservative, no joint resampling",
                )]  # fmt: skip
                out.append(
                    Figure(
                        name=f"transfer_drop[{name}]", kind="difference",
                        estimate=float(home.estimate - worst.estimate),  # type: ignore[operator]
                        denominator=worst.denominator, unit="trial", cluster="trace",
                        unit_count=worst.unit_count,
                        description=f"eval {name} minus its min over transfer contexts ({split}); "
                        "difference of two estimates from disjoint traces, with the conservative "
                        f"interval combining their bootstrap intervals {label}",
                        intervals=intervals,
                    )
                )  # fmt: skip
        return out
