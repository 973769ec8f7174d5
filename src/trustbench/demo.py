"""`trustbench demo`: the main job on built-in defaults (no network, no API keys).

The demo is a sequence of steps, each one a real command of the toolkit run on the built-in
corpus and built-in candidates, writing into one run folder (`./trustbench-demo/` unless told
otherwise, so its outputs sit beside the clone, not in a temporary folder). A step that fails
stops the demo with its error (exit code per `trustbench.errors`): the demo never papers over a
broken step. Expected *findings* are different: a sentinel reviewer failing its release gate is
the harness working, and the demo says so instead of exiting non-zero.

Every step shows progress (trial counts, and one line per model trained on first use) and
returns what it taught, one line each; the closing summary prints those lines, then the paths.
Who is a candidate and who an instrument is read from the report's own verdicts, so the console
and `report.html` always classify a configuration the same way.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trustbench.core import (
    ProgressReporter,
    ReportResult,
    check_output_folder,
    default_progress,
    output_path,
)
from trustbench.errors import CheckFailed

if TYPE_CHECKING:
    from trustbench.rtb.corpus import Corpus

DEFAULT_OUT = "trustbench-demo"
"""The demo's run folder, relative to where it is started."""

StepOutcome = tuple[str, list[str]]
"""What a step returns: where its outputs are (one line), and what it taught (one line each)."""


def _console() -> Console:
    """The terminal's width; 120 columns only when the output is no terminal and no `COLUMNS`.

    Tables then fit the window they print into (rich wraps cells), never a fixed 120 that cuts
    every header of a wide terminal to `scen…`.
    """
    fits_terminal = sys.stdout.isatty() or "COLUMNS" in os.environ
    return Console(width=None if fits_terminal else 120)


NEXT_STEP = "trustbench rtb review --model openai/NAME --base-url http://127.0.0.1:PORT/v1"
"""The command the demo ends on: the same reviewer track, on the user's own model."""


def default_out(cwd: Path) -> Path:
    """`./trustbench-demo/`, or the first free `./trustbench-demo-N/` after it.

    An earlier demo's outputs are evidence: a second demo never writes over them.
    """
    from trustbench._quick_model import next_free_folder

    return next_free_folder(cwd / DEFAULT_OUT)


def demo_corpus_root() -> Path:
    """The corpus the reviewer demo spec runs (its `[corpus] builtin`).

    Steps 1 and 2 validate, export and audit that corpus, so the closing lines say which corpus
    the demo used and what its audit found, read from the spec and the audit run, never written
    here: switching the demo specs to another corpus switches these steps with them.
    """
    import tomllib

    from trustbench.rtb.corpus._load import builtin_corpus_root
    from trustbench.rtb.review._quick import DEMO_SPEC

    spec = tomllib.loads(DEMO_SPEC.read_text(encoding="utf-8"))
    return builtin_corpus_root(spec["corpus"]["builtin"])


@cache
def _loaded_corpus(root: Path) -> Corpus:
    """The corpus at `root`, loaded and validated once per demo.

    Steps 1 and 2 and the track steps' subset lines all read the reviewer demo's corpus.
    """
    from trustbench.rtb.corpus import load_corpus

    return load_corpus(root)


DEMO_AUDIT_FAMILIES_PER_GROUP = 1
"""Contrast families per domain group that step 2 audits (see `demo_audit_subset`)."""


DEMO_POOL_SIZE = 360
"""Generator cases step 2 draws for the pool-trained attackers, where `rtb audit` draws
`_unfiltered_attackers.POOL_SIZE` (1,440). Why: fitting on 1,440 was about a third of step 2's
attacker time (on v0.4's subset 36 s of CPU with 1,440, 24 s with 360, measured 2026-12-06 under
load). What it changes, so the step prints the size: every verdict is the same on v0.4 (the
policy-blind pool attackers stay within chance +/- 15 points, none passes the review gates), but
a smaller pool hides structure, so the reported relational learners recover less of the policy
(57 % of the subset's decisions with 360, 65 % with 1,440): a figure of this demo's workload,
never the full audit's."""


def first_families(corpus: Corpus, per_group: int) -> list[str] | None:
    """The first `per_group` contrast families (by id) of each domain group, in id order.

    The demo's declared subsets are these: step 2's (`demo_audit_subset`, one per group) and
    the control-path demo spec's `corpus.families` (two per group; `tests/test_demo.py` holds
    the list equal to this). None when the corpus's cases name no family (v0.3 and older).
    """
    from trustbench.rtb.corpus._load import case_family

    families_by_group: dict[str, set[str]] = {}
    for case in corpus.cases:
        family = case_family(case)
        if family is None:
            return None
        families_by_group.setdefault(case.group, set()).add(family)
    return sorted(
        family for families in families_by_group.values() for family in sorted(families)[:per_group]
    )


def demo_audit_subset(corpus: Corpus) -> Corpus:
    """The cases step 2 self-audits and attacks: whole families, the first of each domain group.

    Why a subset: the audits `rtb audit` runs cost far more on the 528 cases of v0.4 than on
    v0.3's 240 (about 430 s of CPU, most of it the learned and pool-trained attackers, against
    v0.3's whole step of under a minute), more than the whole demo may take. The subset is
    declared, not sampled: whole contrast families keep each family's contrast and its
    permit / deny / hold balance, one family per group keeps every domain group (the learned
    attackers leave one out). The surface rules and the rule ablation still read every case
    (`run_corpus_audits(attacked=...)`). A corpus whose cases name no family (v0.3 and older)
    is audited whole. `trustbench rtb audit` always audits every case; the demo says how many
    it audited.
    """
    from trustbench.rtb.corpus._load import declared_subset

    families = first_families(corpus, DEMO_AUDIT_FAMILIES_PER_GROUP)
    return corpus if families is None else declared_subset(corpus, families)


def _validate_and_export(out: Path, console: Console, verbose: bool) -> StepOutcome:
    from trustbench.rtb.cli import summary_table
    from trustbench.rtb.corpus import export_candidate_inputs, validate_corpus

    report = validate_corpus(demo_corpus_root())
    if verbose:
        console.print(summary_table(report))
    if not report.ok:
        raise CheckFailed(f"built-in corpus invalid: {report.problems[0]}")
    result = export_candidate_inputs(_loaded_corpus(demo_corpus_root()), out / "rtb-export")
    count = len(result.evaluation_map.evaluations)
    return (
        f"corpus {report.version} valid ({len(report.cases)} cases); {count} candidate inputs "
        f"in {result.inputs_dir} (answer key kept apart in {result.grader_map_path.parent})"
    ), []


def _harness_audit(out: Path, console: Console, verbose: bool) -> StepOutcome:
    from trustbench.rtb._harness_audit import run_corpus_audits, run_harness_audit
    from trustbench.rtb.cli import audit_table, saturation_table
    from trustbench.rtb.review._audit import ablation_table
    from trustbench.rtb.review._learning_audit import artifact_table, learned_table
    from trustbench.rtb.review._unfiltered_attackers import POOL_SIZE, unfiltered_table

    whole = _loaded_corpus(demo_corpus_root())
    corpus = demo_audit_subset(whole)
    subset = (
        ""
        if len(corpus.cases) == len(whole.cases)
        else f"demo subset: {len(corpus.cases)} of {len(whole.cases)} cases (whole contrast "
        f"families, {DEMO_AUDIT_FAMILIES_PER_GROUP} per domain group) for the self-audit and "
        "the learned and pool-trained attackers, every case for the surface rules and the rule "
        "ablation; "
    )
    full_audit = f"`trustbench rtb audit --corpus builtin:v{whole.version}`"
    if subset:
        console.print(f"  ... {subset}`rtb audit` audits every case", highlight=False)
    rows = run_harness_audit(corpus)
    if verbose:  # the audit tables are evidence for the closing lines, not the answer
        console.print(audit_table(rows))
    failed = [row for row in rows if not row.passed and not row.not_run]
    if failed:
        raise CheckFailed(f"harness self-audit failed: {failed[0].track}: {failed[0].check}")
    # The corpus audits `rtb audit` runs (it exits 1 when one fails): reported, not raised,
    # since the later steps show what the harness measures on this corpus either way.
    console.print(
        f"  ... corpus v{corpus.version} audits: surface rules, learned attackers (fitted and "
        "scored leaving one domain group out), artifact scan, attackers it was not selected "
        f"against (policy-blind, and fitted on a fresh {DEMO_POOL_SIZE}-case generator pool, "
        f"where `rtb audit` draws {POOL_SIZE:,}), rule ablation",
        highlight=False,
    )
    audits = run_corpus_audits(whole, attacked=corpus, pool_size=DEMO_POOL_SIZE)
    tables = (
        saturation_table(audits.saturation),
        learned_table(audits.learning.learned),
        artifact_table(audits.learning.artifacts),
        unfiltered_table(audits.unfiltered),
        ablation_table(audits.ablation),
    )
    for table in tables if verbose else ():
        console.print(table)
    tables_note = "" if verbose else "`--verbose` prints the audit tables; "
    console.print(
        f"  ... this demo workload {audits.summary()} ({tables_note}the full audit, not run "
        f"here: {full_audit})",
        highlight=False,
    )
    ran = [row for row in rows if not row.not_run]
    tracks = ", ".join(dict.fromkeys(row.track for row in ran))
    not_run = "".join(f"; {row.track} audit {row.detail}" for row in rows if row.not_run)
    return f"harness self-audit: all {len(ran)} checks that ran hold", [
        f"harness checks: all {len(ran)} self-audit checks that ran held ({tracks}): every "
        f"known-bad instrument was caught and every known-good one passed{not_run}",
        f"corpus v{corpus.version} (the reviewer demo's corpus), a demo workload of its "
        f"`rtb audit` corpus audits ({subset}surface rules, learned attackers, artifact scan, "
        f"attackers not selected against with a {DEMO_POOL_SIZE}-case generator pool, rule "
        f"ablation; the full audit is {full_audit}): {audits.summary()}",
    ]


def _role(instrument: bool, built_to_fail: bool) -> str:
    return (
        ("instrument, built to fail" if built_to_fail else "instrument")
        if instrument
        else ("candidate")
    )


def verdict_table(title: str, result: ReportResult) -> Table:
    """One row per configuration: its role and verdict, exactly as `report.html` states them."""
    table = Table(title=title)
    for column in ("configuration", "role", "verdict"):
        table.add_column(column, overflow="fold")
    for verdict in result.verdicts:
        good = verdict.status in ("passed", "as_expected")
        headline = escape(verdict.headline)
        table.add_row(
            escape(verdict.subject),
            _role(verdict.instrument, verdict.expected_to_fail),
            headline if good else f"[bold red]{headline}[/]",
        )
    return table


_GROUPS = {
    "passed": "passed",
    "blocked": "blocked",
    "not_evaluable": "not evaluable",
    "not_run": "not run",
    "incomplete": "incomplete",
    "no_gates": "no release gate",
    "as_expected": "failed as built",
    "harness_problem": "HARNESS PROBLEM (passed every gate it is built to fail)",
}
"""Verdict status -> how a lesson line groups the subjects that have it, in this order."""


def _grouped(verdicts: dict[str, dict[str, object]], always: str) -> str:
    by_status = {
        label: [s for s, v in verdicts.items() if v["status"] == status]
        for status, label in _GROUPS.items()
    }
    groups = [
        f"{label}: {', '.join(names) or 'none'}"
        for label, names in by_status.items()
        if names or label == always
    ]
    return "[" + " | ".join(groups) + "]"


def track_lesson(track: str, verdicts: dict[str, dict[str, object]]) -> str:
    """One line: which candidates passed or were blocked, which instruments failed as built.

    Args:
        track: The track's name as the line starts.
        verdicts: `record.json`'s `verdicts` (subject -> status, headline, instrument): the
            same verdicts `report.html` shows, so both classify every subject alike.
    """
    candidates = {s: v for s, v in verdicts.items() if not v["instrument"]}
    instruments = {s: v for s, v in verdicts.items() if v["instrument"]}
    line = f"{track}: " + (
        f"candidates {_grouped(candidates, 'passed')}" if candidates else "no candidates"
    )
    return line + (f"; instruments {_grouped(instruments, '')}" if instruments else "")


def informational_lessons(track: str, result: ReportResult) -> list[str]:
    """One line per informational gate a candidate did not pass: the lesson it is declared as.

    An informational gate (`blocking = false`) blocks nothing; the demo keeps one deliberately
    underpowered so the closing summary can say what it teaches, in the spec's own words.
    """
    missed: dict[str, tuple[list[str], str]] = {}
    for verdict in result.verdicts:
        if verdict.instrument:
            continue
        for gate in verdict.gates:
            if not gate.spec.blocking and gate.status != "passed":
                name = gate.spec.label.removesuffix(f" ({verdict.subject})")  # declared name
                subjects, _ = missed.setdefault(name, ([], gate.spec.description))
                subjects.append(verdict.subject)
    return [
        f"{track}: informational gate {name} (does not block) not passed by "
        f"{', '.join(subjects)}: {description}"
        for name, (subjects, description) in missed.items()
    ]


def declared_subset_line(run_dir: Path) -> str | None:
    """`demo subset: N of M cases ...` for a run whose spec declares `corpus.families`, else None.

    Read from the frozen manifest, so the line says what ran, never what the demo meant to run;
    it names the way to the full corpus run (the same spec without the field).
    """
    from trustbench.core import read_manifest
    from trustbench.rtb.corpus._load import corpus_folder, declared_subset

    manifest = read_manifest(run_dir)
    families = manifest.spec.corpus.families
    if families is None:
        return None
    whole = _loaded_corpus(corpus_folder(manifest.corpus.root))
    ran = declared_subset(whole, families)
    spec = Path(manifest.base_dir) / manifest.spec_file
    return (
        f"demo subset: {len(ran.cases)} of {len(whole.cases)} cases of corpus v{whole.version} "
        f"({len(families)} whole contrast families, the spec's corpus.families); full corpus: "
        f"{spec} without corpus.families (`trustbench freeze`, `run`, `report`)"
    )


def _rtb_track_step(
    run: Callable[[Path, ProgressReporter], ReportResult], folder: str, title: str, note: str
) -> Callable[[Path, Console, bool], StepOutcome]:
    """A demo step that freezes, runs and reports one RTB track, then shows its verdicts."""

    def step(out: Path, console: Console, verbose: bool) -> StepOutcome:
        result = run(out / folder, default_progress())
        subset = declared_subset_line(out / folder)
        if subset is not None:
            console.print(f"  ... {subset}", highlight=False, markup=False)
        console.print(verdict_table(title, result))
        for verdict in result.verdicts:
            if verdict.status == "blocked":  # why, in the gate's words (bound vs threshold)
                for gate in verdict.gates:
                    if gate.status == "failed":
                        console.print(f"  {gate.reason}", highlight=False)
        if verbose:
            console.print(note)
        record = json.loads(result.record_path.read_text(encoding="utf-8"))
        name = title.split(":")[0].removeprefix("RTB ")
        ran = "" if subset is None else f" ({subset.split(' (', 1)[0]})"
        return f"{title.split(':')[0]} report: {result.html_path}", [
            track_lesson(name, record["verdicts"]) + ran,
            *informational_lessons(name, result),
        ]

    return step


def _run_review(out: Path, progress: ProgressReporter) -> ReportResult:
    from trustbench.rtb.review._quick import run_review_demo

    return run_review_demo(out, progress)


def _run_control(out: Path, progress: ProgressReporter) -> ReportResult:
    from trustbench.rtb.control.track import run_control_demo

    return run_control_demo(out, progress)


def _run_workflow(out: Path, progress: ProgressReporter) -> ReportResult:
    from trustbench.rtb.workflow.track import run_workflow_demo

    return run_workflow_demo(out, progress)


_review_track = _rtb_track_step(
    _run_review,
    "rtb-review",
    "RTB reviewer track: verdict per configuration",
    "Sentinels (always-permit, always-deny, empty, malformed, forged-refs, random) are "
    "instruments built to fail their gates: that is the harness measuring them correctly.",
)
_control_track = _rtb_track_step(
    _run_control,
    "rtb-control",
    "RTB control-path track: verdict per boundary",
    "review-gated gates the application, not the executor, so a direct request bypasses it; "
    "unchecked is the instrument that must be caught; both are built to fail. A gate on the "
    "upper bound of a rate is read per distinct source case: 0 effects in n cases bound it at "
    "1 - 0.05^(1/n), about 3/n, so a 5% gate needs 59 cases and a 0.5% gate 598; the demo's "
    "gates are set to what a correct boundary can show at its case count (the spec says why), "
    "and a 0.5% gate is kept as an informational one that fails and blocks nothing. A "
    "simulated denial does not establish a real API's behaviour.",
)
_workflow_track = _rtb_track_step(
    _run_workflow,
    "rtb-workflow",
    "RTB workflow track: verdict per agent + boundary",
    "Scripted agents qualify the harness; they are not candidates, and each is classified by "
    "what it declares: false-claiming must fail the unsupported-claims gate, forging through a "
    "label-trusting boundary the prohibited-effect gates, and the memory-poisoned agent, whose "
    "poisoned request the reference boundary stops, loses the permitted work of every "
    "poisoned-memory scenario (the permitted-work gate). As on the control "
    "path, the prohibited-effect bound is gated at what zero effects can show at this case "
    "count (a 5% gate needs 59 cases). Outcomes come only from the observer.",
)


def _loop_rows(workflow: dict[str, Any]) -> list[list[str]]:
    """The demo's table rows: one per configuration of the loop example.

    Reviewer approvals of prohibited live proposals, prohibited effects the observer saw, and
    the joint approval rate beside the product of the marginals (the configuration's name says
    its chain and boundary).
    """
    loop = workflow.get("review_loop", {})
    rows = []
    for name in workflow["configurations"]:
        effect = workflow["counts"][name]["prohibited_effect"]
        figures = loop.get(name, {})
        joint = figures.get("joint")
        rows.append(
            [
                name,
                f"{figures['approvals_of_prohibited']} / {figures['prohibited_proposals']}"
                if figures
                else "-",
                f"{effect['numerator']} / {effect['denominator']}",
                "-"
                if joint is None
                else f"{joint['all_approve']['estimate']:.3f} (product "
                f"{joint['product_of_marginals']:.3f})",
            ]
        )
    return rows


def _review_loop(out: Path, console: Console, verbose: bool) -> StepOutcome:
    """Reviewers in the loop: who catches what a control misses, and the reverse."""
    from trustbench.rtb.workflow.track import run_loop_demo

    result = run_loop_demo(out / "rtb-loop", default_progress())
    record = json.loads(result.record_path.read_text(encoding="utf-8"))
    table = Table(title="RTB reviewers in the loop: reckless agent x review chain x boundary")
    for column in (
        "reviewers-boundary",
        "approved prohibited",
        "prohibited effects",
        "P(all approve | prohibited)",
    ):
        table.add_column(column, overflow="fold")
    for row in _loop_rows(record["workflow"]):
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)
    if verbose:
        console.print(
            "Live proposals are decided by the Python reference and Cedar on the state at "
            "proposal time; effects come from the observer. The 'self' reviewer is the "
            "reference reviewer without the rule the agent never checks (approved parameters)."
        )
    loop = record["workflow"]["review_loop"]
    caught = loop["reference-reviewer-unchecked"]
    missed, stopped = loop["self-reviewer-unchecked"], record["workflow"]["counts"]
    twice = loop["self-twice-unchecked"]["joint"]
    return f"RTB review loop report: {result.html_path}", [
        f"RTB review loop: the reference reviewer approved {caught['approvals_of_prohibited']} "
        f"of {caught['prohibited_proposals']} prohibited live proposals behind `unchecked` (a "
        "reviewer catching what a control misses); the 'self' reviewer approved "
        f"{missed['approvals_of_prohibited']} (the agent's own blind spot), which the reference "
        f"boundary stopped ({stopped['self-reviewer-reference']['prohibited_effect']['numerator']}"
        " prohibited effects; behind `unchecked`: "
        f"{stopped['self-reviewer-unchecked']['prohibited_effect']['numerator']})",
        f"RTB review loop: two reviewers sharing their misses both approved "
        f"{twice['all_approve']['numerator']} of {twice['all_approve']['denominator']} "
        f"prohibited proposals ({twice['all_approve']['estimate']:.3f}, from joint decisions), "
        f"where the product of their marginal rates says {twice['product_of_marginals']:.3f}",
    ]


DEMO_TRB_SPEC = "demo_profile.toml"
"""The TRB step's spec (`trb/experiments/`): `smoke` on 20 eval traces where `smoke` runs 40, the
same models, gates and seeds. Why: the models are cached, so traces are the step's cost, and
the step's lesson (the gap's interval above 0, every baseline's verdict) holds at 20 (see the
spec's header); the step prints the trace count and names `smoke` as the run to quote."""


def _trb_experiment(file_name: str) -> Path:
    """The path of a TRB spec shipped in `trb/experiments/`."""
    from importlib.resources import files

    return Path(str(files("trustbench.trb").joinpath("experiments", file_name)))


def _max_traces(file_name: str) -> int:
    """The eval traces a shipped TRB spec runs (`track_options.max_traces`).

    Read from the spec so the step prints what its spec says, never a figure written twice.
    """
    import tomllib

    spec = tomllib.loads(_trb_experiment(file_name).read_text(encoding="utf-8"))
    return int(spec["track_options"]["max_traces"])


def _trb_profile(out: Path, console: Console, verbose: bool) -> StepOutcome:
    from trustbench.trb.track import builtin_spec, freeze_run_report

    console.print(
        f"  ... demo spec {DEMO_TRB_SPEC}: the smoke spec on {_max_traces(DEMO_TRB_SPEC)} eval "
        f"traces where `trustbench trb run --spec smoke` runs {_max_traces('smoke.toml')} "
        "(same models, gates and seeds)",
        highlight=False,
    )
    spec = builtin_spec(str(_trb_experiment(DEMO_TRB_SPEC)))
    result = freeze_run_report(spec, out / "trb", default_progress())
    record = json.loads(result.record_path.read_text(encoding="utf-8"))
    gap = record["trb"]["governance_gap"]
    interval = gap["bootstrap"]
    gap_line = (
        f"governance gap Delta_gov = G({gap['full']}) - G({gap['ablation']}) = "
        f"{gap['estimate']:.3f}, {interval['confidence']:.0%} trace-clustered bootstrap interval "
        f"[{interval['lower']:.3f}, {interval['upper']:.3f}] over {gap['paired_traces']} eval "
        f"traces (seed {interval['seed']}, {interval['resamples']} resamples)"
    )
    console.print(gap_line, highlight=False)
    if verbose:
        console.print(
            "TRB demo profile (smoke on fewer eval traces): all six tracks (G, grounding, "
            "attribution, viability, navigability, transfer) for the five spec baselines "
            "(instruct, CoT-prompted and CoT-supervised finetune token-world LMs through the "
            "proxy adapter; Trace-AI ablation and full "
            "through the native adapter) and audit oracles, with the governance gap. Reference "
            "world only (synthetic counterfactuals, no human data, one author-generated transfer "
            "context): a harness check, not a TRB score."
        )
    return f"TRB profile report: {result.html_path}", [
        track_lesson("TRB profile", record["verdicts"]),
        f"TRB {gap_line} (reference world: a harness check, not a TRB score)",
    ]


Step = tuple[str, Callable[[Path, Console, bool], StepOutcome]]

STEPS: list[Step] = [
    ("RTB corpus: validate and export candidate inputs", _validate_and_export),
    ("RTB harness self-audit", _harness_audit),
    ("RTB reviewer track: freeze, run, report", _review_track),
    ("RTB control-path track: freeze, run, report", _control_track),
    ("RTB workflow track: freeze, run, report", _workflow_track),
    ("RTB reviewers in the loop: freeze, run, report", _review_loop),
    ("TRB profile: freeze (trains small models on first use), run, report", _trb_profile),
]
"""The demo's steps, in order: (title, function(run folder, console, verbose) -> (where, lessons)).

Without `verbose` a step prints its verdicts and one line per audit, so the whole demo stays
near 120 lines with the answer at the end; `--verbose` adds the audit tables and the notes."""


@contextmanager
def _show_status(console: Console) -> Iterator[None]:
    """Print the toolkit's status lines (a model trained on first use...) while a step runs."""

    class _Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            console.print(f"  ... {record.getMessage()}", highlight=False, markup=False)

    logger, handler = logging.getLogger("trustbench"), _Lines(logging.INFO)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def run_demo(out: str | None, verbose: bool = False) -> Path:
    """Run every demo step into `out` (default `./trustbench-demo/`); return the folder.

    A given `out` is checked like any folder output: not empty (`--out ""` is not "no --out"),
    not a run folder nor inside one (the demo's exports would land among its evidence).
    """
    root = default_out(Path.cwd()) if out is None else check_output_folder(output_path(out))
    root.mkdir(parents=True, exist_ok=True)
    console = _console()
    console.print(f"trustbench demo: writing into {root}", highlight=False, soft_wrap=True)
    summaries: list[str] = []
    lessons: list[str] = []
    with _show_status(console):
        for index, (title, step) in enumerate(STEPS, start=1):
            console.rule(f"[bold]{index}/{len(STEPS)} {title}")
            started = time.perf_counter()
            where, learned = step(root, console, verbose)
            summaries.append(f"{where} ({time.perf_counter() - started:.1f} s)")
            lessons += learned
    console.rule("[bold]what the demo showed")
    for lesson in lessons:
        console.print(f"- {lesson}", highlight=False, markup=False, soft_wrap=True)
    console.rule("[bold]outputs")
    for summary in summaries:
        console.print(f"- {summary}", highlight=False, markup=False, soft_wrap=True)
    console.print(f"demo outputs: {root}", highlight=False, markup=False)
    console.rule("[bold]next: bring your own model")
    console.print(
        "Any OpenAI-compatible server (vLLM, Ollama, llama.cpp, `transformers serve`) as a "
        "reviewer, on the same corpus and gates:",
        highlight=False,
    )
    console.print(f"  {NEXT_STEP}", highlight=False, markup=False, soft_wrap=True)
    return root
