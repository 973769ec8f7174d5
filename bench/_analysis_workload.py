"""The analysis bench's workload: grade 100,000 reviewer trials into figures, gates and reports.

Rows are `trustbench.rtb.review._grading.ReviewTrialRow`s synthesised with a seeded generator on
the built-in corpus's real cases (their groups, variants and reference decisions), for two
reviewer configurations. `analyze` does what the reviewer track's report step does with them:
review counts overall / per group / per variant, a clustered figure (cluster-robust t and a
seeded cluster bootstrap) and an exact binomial figure per headline rate, release gates on the
bootstrap upper bounds, `record.json` (every trial row included) and `report.html` with plots.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._workload import corpus
from trustbench.core._report_run import evaluate_subject_gates
from trustbench.core.figures import Figure, rate_figure
from trustbench.core.gates import GateSpec
from trustbench.core.report import (
    ConfusionBlock,
    FiguresBlock,
    ForestBlock,
    ReportPage,
    gates_record,
    write_record_json,
    write_report_html,
)
from trustbench.core.stats import clustered_figure
from trustbench.rtb.corpus import Decision
from trustbench.rtb.review._grading import ReviewTrialRow, review_metrics
from trustbench.rtb.review._validation import Outcome

CONFIGURATIONS = ("reviewer-a", "reviewer-b")

# Headline rates: name -> (reference population, event on a row).
RATES: dict[str, tuple[Decision | None, Callable[[ReviewTrialRow], bool]]] = {
    "false_approval": (Decision.DENY, lambda r: r.observed is Outcome.PERMIT),
    "unsupported_permit": (Decision.HOLD, lambda r: r.observed is Outcome.PERMIT),
    "utility_loss": (Decision.PERMIT, lambda r: r.observed is not Outcome.PERMIT),
    "holds": (None, lambda r: r.observed is Outcome.HOLD),
    "missing": (None, lambda r: r.observed is Outcome.MISSING),
    "invalid": (None, lambda r: r.observed is Outcome.INVALID),
}


def synthetic_rows(trials: int, seed: int = 3) -> dict[str, list[ReviewTrialRow]]:
    """`trials` rows split evenly over the configurations, every case tried equally often."""
    rng = random.Random(seed)
    cases = corpus().cases
    per_config = trials // len(CONFIGURATIONS)
    outcomes = list(Outcome)
    rows: dict[str, list[ReviewTrialRow]] = {}
    for error_rate, name in zip((0.03, 0.08), CONFIGURATIONS, strict=True):
        rows[name] = []
        for index in range(per_config):
            case = cases[index % len(cases)]
            reference = case.expectations.reference_decision
            observed = (
                rng.choice(outcomes) if rng.random() < error_rate else Outcome(reference.value)
            )
            rows[name].append(
                ReviewTrialRow(
                    case_id=case.case_id,
                    group=case.group,
                    variant=case.variant,
                    trial=index // len(cases),
                    reference=reference,
                    observed=observed,
                    supported=observed.is_decision and rng.random() > 0.02,
                    latency_s=rng.uniform(0.2, 3.0),
                    tokens=rng.randint(1500, 2500),
                    cost_usd=None,
                )
            )
    return rows


def _figures(rows: list[ReviewTrialRow], resamples: int) -> list[Figure]:
    figures: list[Figure] = []
    for name, (reference, event) in RATES.items():
        population = [r for r in rows if reference is None or r.reference is reference]
        events: dict[str, int] = defaultdict(int)
        counts: dict[str, int] = defaultdict(int)
        group_of: dict[str, str] = {}
        for row in population:
            counts[row.case_id] += 1
            events[row.case_id] += event(row)
            group_of[row.case_id] = row.group
        case_ids = sorted(counts)
        population_name = f"reference {reference}" if reference else "all"
        figures.append(
            clustered_figure(
                name,
                [events[c] for c in case_ids],
                [counts[c] for c in case_ids],
                [group_of[c] for c in case_ids],
                description=f"trials with the event / trials with {population_name}",
                cluster="domain_group",
                unit="trial",
                seed=0,
                resamples=resamples,
            )
        )
        figures.append(
            rate_figure(
                f"{name}_trials",
                sum(events.values()),
                len(population),
                description=f"{population_name} trials (binomial: assumes independent trials)",
                one_sided_upper=True,
            )
        )
    return figures


def analyze(rows: dict[str, list[ReviewTrialRow]], out_dir: Path, resamples: int) -> dict[str, Any]:
    """Grade, gate and report; return seconds per step."""
    steps: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(step: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        steps[step] = now - clock
        clock = now

    metrics = {name: review_metrics(config_rows) for name, config_rows in rows.items()}
    lap("review_counts")
    subjects = {name: _figures(config_rows, resamples) for name, config_rows in rows.items()}
    lap("figures_and_intervals")
    gates = evaluate_subject_gates(
        [
            GateSpec(
                metric="false_approval",
                threshold=0.05,
                comparison="<=",
                bound="upper",
                interval_method="cluster_bootstrap_percentile",
                confidence=0.95,
                sidedness="two_sided",
            ),
            GateSpec(metric="utility_loss", threshold=0.10, comparison="<="),
        ],
        subjects,
    )
    lap("gates")
    record = {
        "format": "trustbench.record/1",
        "gates": gates_record(gates),
        "figures": {s: [f.model_dump(mode="json") for f in fs] for s, fs in subjects.items()},
        "review_metrics": {name: m.model_dump(mode="json") for name, m in metrics.items()},
        "trials": {name: [r.model_dump(mode="json") for r in rs] for name, rs in rows.items()},
    }
    write_record_json(out_dir / "record.json", record)
    lap("record_json")
    sections: list[Any] = []
    for name, figures in subjects.items():
        confusion = metrics[name].overall.confusion
        sections += [
            FiguresBlock(title=f"{name}: headline rates", figures=figures),
            ForestBlock(
                title=f"{name}: clustered intervals",
                figures=[f for f in figures if f.cluster],
                interval_method="cluster_bootstrap_percentile",
            ),
            ConfusionBlock(
                title=f"{name}: reference x observed",
                rows=[d.value for d in Decision],
                columns=[o.value for o in Outcome],
                counts=[[confusion.cell(d, o) for o in Outcome] for d in Decision],
            ),
        ]
    page = ReportPage(
        title="bench: reviewer analysis",
        subtitle=f"{sum(len(r) for r in rows.values())} synthetic trials",
        gates=gates,
        sections=sections,
    )
    write_report_html(out_dir / "report.html", page)
    lap("report_html")
    steps["gates_failed"] = sum(g.status != "passed" for g in gates)
    return steps
