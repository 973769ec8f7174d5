"""`trustbench demo`: the main job on built-in defaults (no network, no API keys).

The demo is a sequence of steps, each one a real command of the toolkit run on the built-in
corpus and built-in candidates, writing into one run folder. A step that fails stops the demo
with its error (exit code per `trustbench.errors`): the demo never papers over a broken step.
Expected *findings* are different: a sentinel reviewer failing its release gate is the harness
working, and the demo says so instead of exiting non-zero.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from trustbench.core import ReportResult
from trustbench.errors import CheckFailed


def _console() -> Console:
    return Console(width=None if sys.stdout.isatty() else 120)


def _validate_and_export(out: Path, console: Console) -> str:
    from trustbench.rtb import export_candidate_inputs, load_corpus, validate_corpus
    from trustbench.rtb.cli import summary_table

    report = validate_corpus()
    console.print(summary_table(report))
    if not report.ok:
        raise CheckFailed(f"built-in corpus invalid: {report.problems[0]}")
    result = export_candidate_inputs(load_corpus(), out / "rtb-export")
    count = len(result.evaluation_map.evaluations)
    return (
        f"corpus {report.version} valid ({len(report.cases)} cases); {count} candidate inputs "
        f"in {result.inputs_dir} (answer key kept apart in {result.grader_map_path.parent})"
    )


def _harness_audit(out: Path, console: Console) -> str:
    from trustbench.rtb import load_corpus
    from trustbench.rtb._harness_audit import run_corpus_saturation, run_harness_audit
    from trustbench.rtb.cli import audit_table, saturation_table
    from trustbench.rtb.review._shortcuts import verdict_line

    corpus = load_corpus()
    rows = run_harness_audit(corpus)
    console.print(audit_table(rows))
    failed = [row for row in rows if not row.passed]  # "not run" cannot happen on the starter: fail
    if failed:
        raise CheckFailed(f"harness self-audit failed: {failed[0].track}: {failed[0].check}")
    # The built-in starter is saturated: said here as `rtb audit` says it (where it exits 1),
    # without stopping the demo, whose later steps show what the harness measures on it.
    saturation = run_corpus_saturation(corpus)
    console.print(saturation_table(saturation))
    return f"harness self-audit: all {len(rows)} checks hold; {verdict_line(saturation)}"


def _gate_table(title: str, result: ReportResult) -> Table:
    """Gates per subject: the first thing a reader of a report should see."""
    by_subject: dict[str, dict[str, list[str]]] = {}
    for gate in result.gates:
        name, _, subject = gate.spec.label.rpartition(" (")
        cell = by_subject.setdefault(subject.rstrip(")"), {})
        cell.setdefault(gate.status, []).append(name)
    table = Table(title=title)
    for column in ("configuration", "gates passed", "gates failed / not evaluable"):
        table.add_column(column, overflow="fold")
    for subject, cell in by_subject.items():
        blocked = cell.get("failed", []) + cell.get("not_evaluable", [])
        table.add_row(
            subject,
            ", ".join(cell.get("passed", [])) or "-",
            f"[bold red]{', '.join(blocked)}[/]" if blocked else "-",
        )
    return table


def _rtb_track_step(
    run: Callable[[Path], ReportResult], folder: str, title: str, expectation: str
) -> Callable[[Path, Console], str]:
    """A demo step that freezes, runs and reports one RTB track, then shows its gates."""

    def step(out: Path, console: Console) -> str:
        result = run(out / folder)
        console.print(_gate_table(title, result))
        console.print(expectation)
        return f"{title.split(':')[0]} report: {result.html_path}"

    return step


def _run_review(out: Path) -> ReportResult:
    from trustbench.rtb.review.track import run_review_demo

    return run_review_demo(out)


def _run_control(out: Path) -> ReportResult:
    from trustbench.rtb.control.track import run_control_demo

    return run_control_demo(out)


def _run_workflow(out: Path) -> ReportResult:
    from trustbench.rtb.workflow.track import run_workflow_demo

    return run_workflow_demo(out)


_review_track = _rtb_track_step(
    _run_review,
    "rtb-review",
    "RTB reviewer track: release gates per configuration",
    "Sentinels (always-permit, always-deny, empty, malformed, forged-refs, random) are expected "
    "to fail gates: that is the harness measuring them correctly.",
)
_control_track = _rtb_track_step(
    _run_control,
    "rtb-control",
    "RTB control-path track: release gates per boundary",
    "review-gated and unchecked are expected to fail: they execute direct requests without "
    "checking the approval. Counted per distinct source case (58), even 0 effects bound the rate "
    "only at 5.03%, so no boundary passes the 5% bound here; a case completes only if all its "
    "scenarios did (10 of 20: lost-response scenarios stay unresolved). A simulated denial does "
    "not establish a real API's behaviour.",
)
_workflow_track = _rtb_track_step(
    _run_workflow,
    "rtb-workflow",
    "RTB workflow track: release gates per agent + boundary",
    "Scripted agents qualify the harness; they are not candidates. Expected: honest passes "
    "all but the 5% bound (57 distinct source cases bound 0 effects only at 5.12%); "
    "false-claiming fails the unsupported-claims gate; forging through a label-trusting "
    "boundary fails the prohibited-effect gates; outcomes come only from the observer.",
)


def _trb_profile(out: Path, console: Console) -> str:
    from trustbench.trb.track import run_trb_demo

    html_path = run_trb_demo(out / "trb")
    record = json.loads((html_path.parent / "record.json").read_text(encoding="utf-8"))
    gap = record["trb"]["governance_gap"]
    interval = gap["bootstrap"]
    console.print(
        f"governance gap Delta_gov = G({gap['full']}) - G({gap['ablation']}) = "
        f"{gap['estimate']:.3f}, {interval['confidence']:.0%} trace-clustered bootstrap interval "
        f"[{interval['lower']:.3f}, {interval['upper']:.3f}] over {gap['paired_traces']} eval "
        f"traces (seed {interval['seed']}, {interval['resamples']} resamples)",
        highlight=False,
    )
    console.print(
        "TRB smoke: all six tracks (G, grounding, attribution, viability, navigability, "
        "transfer) for the five spec baselines (instruct, CoT-prompted and CoT-supervised "
        "finetune token-world LMs through the proxy adapter; Trace-AI ablation and full through "
        "the native adapter) and audit oracles, with the governance gap. Reference world only "
        "(synthetic counterfactuals, no human data, one author-generated transfer context): a "
        "harness check, not a TRB score."
    )
    return f"TRB profile report: {html_path}"


Step = tuple[str, Callable[[Path, Console], str]]

STEPS: list[Step] = [
    ("RTB corpus: validate and export candidate inputs", _validate_and_export),
    ("RTB harness self-audit", _harness_audit),
    ("RTB reviewer track: freeze, run, report", _review_track),
    ("RTB control-path track: freeze, run, report", _control_track),
    ("RTB workflow track: freeze, run, report", _workflow_track),
    ("TRB profile: freeze, run, report", _trb_profile),
]
"""The demo's steps, in order: (title, function(run folder, console) -> one-line summary)."""


def run_demo(out: str | None) -> Path:
    """Run every demo step into `out` (a new temporary folder when None); return the folder."""
    root = Path(out) if out else Path(tempfile.mkdtemp(prefix="trustbench-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    console = _console()
    summaries: list[str] = []
    for index, (title, step) in enumerate(STEPS, start=1):
        console.rule(f"[bold]{index}/{len(STEPS)} {title}")
        started = time.perf_counter()
        summary = step(root, console)
        summaries.append(f"{summary} ({time.perf_counter() - started:.1f} s)")
    console.rule("[bold]summary")
    for summary in summaries:
        console.print(f"- {summary}", highlight=False)
    console.print(f"demo outputs: {root}", highlight=False)
    return root
